#include "backends/cuda/gemm.h"

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kFloat: return CUDA_R_32F;
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    default: throw InputError("cuBLASLt products take float, float16 or bfloat16, not " + std::string(dtype_name(t)));
  }
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    // The swap of operands (see gemm.h) turns op(B) into cuBLASLt's A and op(A) into its B.
    case GemmEpilogue::kBiasGradFromB: return CUBLASLT_EPILOGUE_BGRADA;
    case GemmEpilogue::kBiasGradFromA: return CUBLASLT_EPILOGUE_BGRADB;
  }
  throw Error("internal: unknown GemmEpilogue");
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  AMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
}

template <class T>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v) {
  AMP_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof v));
}

cublasLtMatrixLayout_t make_layout(DType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  AMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, cuda_type(t), static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    set_layout(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
    set_layout(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }
  return l;
}

}  // namespace

std::string GemmDesc::key() const {
  return std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k) + "," + std::to_string(trans_a) +
         std::to_string(trans_b) + "," + std::to_string(batch) + "," + std::to_string(stride_a) + "," +
         std::to_string(stride_b) + "," + std::to_string(stride_c) + "," + std::to_string(static_cast<int>(ab_type)) +
         "," + std::to_string(static_cast<int>(d_type)) + "," + std::to_string(beta != 0.0f) + "," +
         std::to_string(static_cast<int>(epilogue)) + "," + std::to_string(tf32);
}

const cublasLtMatmulHeuristicResult_t* GemmAlgorithmCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = results_.find(key);
  return it == results_.end() ? nullptr : &it->second;
}

void GemmAlgorithmCache::put(const std::string& key, const cublasLtMatmulHeuristicResult_t& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  results_.emplace(key, result);
}

GemmPlan::GemmPlan(const GemmDesc& desc, cublasLtHandle_t lt, GemmAlgorithmCache& cache) : desc_(desc) {
  // cuBLASLt's BGRADA takes only a non-transposed A and BGRADB only a transposed B; anything
  // else finds no algorithm. After the swap that is op(B) = B and op(A) = A^T here.
  if ((desc.epilogue == GemmEpilogue::kBiasGradFromB && desc.trans_b) ||
      (desc.epilogue == GemmEpilogue::kBiasGradFromA && !desc.trans_a))
    throw Error("internal: a bias-gradient epilogue needs B untransposed (from B) or A transposed (from A)");
  const bool fp32 = desc.ab_type == DType::kFloat;
  const cublasComputeType_t compute = fp32 && desc.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  AMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F));
  // Column-major D^T[n,m] = op(B)^T op(A)^T: cuBLASLt's A is our B and its B is our A. A row-major
  // [r,c] matrix is a column-major [c,r] one with leading dimension c.
  const cublasOperation_t lt_trans_a = desc.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t lt_trans_b = desc.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(op_, CUBLASLT_MATMUL_DESC_TRANSA, lt_trans_a);
  set_desc(op_, CUBLASLT_MATMUL_DESC_TRANSB, lt_trans_b);
  set_desc(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(desc.epilogue));
  if (desc.epilogue != GemmEpilogue::kNone)
    set_desc(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(desc.d_type)));

  const int64_t m = desc.m, n = desc.n, k = desc.k;
  a_ = desc.trans_b ? make_layout(desc.ab_type, k, n, k, desc.batch, desc.stride_b)
                    : make_layout(desc.ab_type, n, k, n, desc.batch, desc.stride_b);
  b_ = desc.trans_a ? make_layout(desc.ab_type, m, k, m, desc.batch, desc.stride_a)
                    : make_layout(desc.ab_type, k, m, k, desc.batch, desc.stride_a);
  c_ = make_layout(desc.d_type, n, m, n, desc.batch, m * n);
  if (desc.beta != 0.0f && desc.stride_c != m * n)
    throw Error("internal: C must be laid out like D (stride " + std::to_string(m * n) + ")");

  const std::string key = desc.key();
  if (const auto* hit = cache.find(key)) {
    algorithm_ = *hit;
    return;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  AMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = kMaxWorkspace;
  AMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, op_, a_, b_, c_, c_, pref, 1, &algorithm_, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    release();  // a throwing constructor runs no destructor
    throw NoGemmAlgorithm("cuBLASLt has no algorithm for a " + std::string(dtype_name(desc.ab_type)) + " product [" +
                std::to_string(m) + "x" + std::to_string(k) + "]x[" + std::to_string(k) + "x" + std::to_string(n) +
                "] batch " + std::to_string(desc.batch) + " with epilogue " +
                std::to_string(static_cast<int>(desc.epilogue)) + " (" + cublasLtGetStatusString(status) + ")");
  }
  cache.put(key, algorithm_);
}

GemmPlan::~GemmPlan() { release(); }

void GemmPlan::release() {
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  a_ = b_ = c_ = nullptr;
  op_ = nullptr;
}

void GemmPlan::enqueue(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d,
                       void* bias, void* workspace) const {
  if (desc_.epilogue != GemmEpilogue::kNone) set_desc(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = desc_.alpha, beta = desc_.beta;
  AMP_CUBLAS_CHECK(cublasLtMatmul(lt, op_, &alpha, b, a_, a, b_, &beta, desc_.beta != 0.0f ? c : d, c_, d, c_,
                                  &algorithm_.algo, workspace, algorithm_.workspaceSize, stream));
}

}  // namespace amp::cuda
