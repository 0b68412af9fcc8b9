#include "backends/cuda/gemm.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_padding.h"
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
    case GemmEpilogue::kReluAuxBias: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case GemmEpilogue::kDRelu: return CUBLASLT_EPILOGUE_DRELU;
    case GemmEpilogue::kDReluBiasGrad: return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case GemmEpilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GemmEpilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::kDGeluBiasGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  throw Error("internal: unknown GemmEpilogue");
}

}  // namespace

const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "BIAS";
    case GemmEpilogue::kReluBias: return "RELU_BIAS";
    case GemmEpilogue::kBiasGradFromB: return "BGRADA";
    case GemmEpilogue::kBiasGradFromA: return "BGRADB";
    case GemmEpilogue::kReluAuxBias: return "RELU_AUX_BIAS";
    case GemmEpilogue::kDRelu: return "DRELU";
    case GemmEpilogue::kDReluBiasGrad: return "DRELU_BGRAD";
    case GemmEpilogue::kGeluBias: return "GELU_BIAS";
    case GemmEpilogue::kGeluAuxBias: return "GELU_AUX_BIAS";
    case GemmEpilogue::kDGelu: return "DGELU";
    case GemmEpilogue::kDGeluBiasGrad: return "DGELU_BGRAD";
  }
  return "?";
}

namespace {

// Every epilogue but the two that only apply an aux matrix reads or writes the bias vector.
bool uses_bias(GemmEpilogue e) { return e != GemmEpilogue::kNone && e != GemmEpilogue::kDRelu && e != GemmEpilogue::kDGelu; }

bool relu_aux(GemmEpilogue e) {
  return e == GemmEpilogue::kReluAuxBias || e == GemmEpilogue::kDRelu || e == GemmEpilogue::kDReluBiasGrad;
}

bool gelu_aux(GemmEpilogue e) {
  return e == GemmEpilogue::kGeluAuxBias || e == GemmEpilogue::kDGelu || e == GemmEpilogue::kDGeluBiasGrad;
}

// The alignment the heuristic is told every aux buffer has (cublasLt.h: routines that do not
// dereference the aux pointer read the alignment they may assume from its value). Arena buffers
// are 256-byte aligned.
constexpr uintptr_t kAuxAlignment = 256;

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

int64_t gemm_aux_ld(GemmEpilogue e, int64_t n) {
  if (relu_aux(e)) return (n + 127) / 128 * 128;
  if (gelu_aux(e)) return (n + 7) / 8 * 8;
  return 0;
}

size_t gemm_aux_bytes(GemmEpilogue e, DType d_type, int64_t rows, int64_t n) {
  const auto elements = static_cast<size_t>(rows * gemm_aux_ld(e, n));
  return relu_aux(e) ? elements / 8 : elements * dtype_size(d_type);
}

std::string GemmDesc::key() const {
  return std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k) + "," + std::to_string(trans_a) +
         std::to_string(trans_b) + "," + std::to_string(batch) + "," + std::to_string(stride_a) + "," +
         std::to_string(stride_b) + "," + std::to_string(stride_c) + "," + std::to_string(static_cast<int>(ab_type)) +
         "," + std::to_string(static_cast<int>(d_type)) + "," + std::to_string(beta != 0.0f) + "," +
         std::to_string(static_cast<int>(epilogue)) + "," + std::to_string(tf32);
}

std::string GemmDesc::str() const {
  return std::string(dtype_name(ab_type)) + " [" + std::to_string(m) + "x" + std::to_string(k) + "]x[" +
         std::to_string(k) + "x" + std::to_string(n) + "] batch " + std::to_string(batch) + " with " +
         gemm_epilogue_name(epilogue);
}

std::optional<GemmAlgorithmCache::Entry> GemmAlgorithmCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void GemmAlgorithmCache::put(const std::string& key, Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.emplace(key, std::move(entry));
}

void GemmAlgorithmCache::set_working(const std::string& key, size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) it->second.working = index;
}

GemmPlan::GemmPlan(const GemmDesc& desc, cublasLtHandle_t lt, GemmAlgorithmCache& cache, DeviceReport* report)
    : desc_(desc), padding_(std::make_unique<GemmPadding>(desc)), key_(padding_->run().key()), cache_(&cache),
      report_(report) {
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
  // The bias and the bias gradient are D's type, as the CPU backend's graphs have them.
  if (uses_bias(desc.epilogue))
    set_desc(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(desc.d_type)));
  if (const int64_t aux_ld = gemm_aux_ld(desc.epilogue, desc.n)) {
    // The aux type is left unset: the ReLU mask is bits, GELU's input D's type.
    set_desc(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    if (desc.batch > 1) set_desc(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, aux_ld * desc.m);
    set_desc(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, reinterpret_cast<void*>(kAuxAlignment));
  }

  // The layouts of the product cuBLASLt runs: padded where a leading dimension needs it.
  const int64_t m = padding_->run().m, n = padding_->run().n, k = padding_->run().k;
  a_ = desc.trans_b ? make_layout(desc.ab_type, k, n, k, desc.batch, desc.stride_b)
                    : make_layout(desc.ab_type, n, k, n, desc.batch, desc.stride_b);
  b_ = desc.trans_a ? make_layout(desc.ab_type, m, k, m, desc.batch, desc.stride_a)
                    : make_layout(desc.ab_type, k, m, k, desc.batch, desc.stride_a);
  c_ = make_layout(desc.d_type, n, m, n, desc.batch, m * n);
  if (desc.beta != 0.0f && desc.stride_c != m * n)
    throw Error("internal: C must be laid out like D (stride " + std::to_string(m * n) + ")");

  if (padding_->active() && report)
    report->record("gemm_padded", {{"product", desc.str()},
                                   {"runs", padding_->padded_str()},
                                   {"staged_bytes", std::to_string(padding_->staging_bytes())}});
  if (std::optional<GemmAlgorithmCache::Entry> hit = cache.find(key_)) {
    algorithms_ = std::move(hit->results);
    current_ = hit->working;
    return;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  AMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = kMaxWorkspace;
  AMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  int found = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> results(kHeuristicResults);
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt, op_, a_, b_, c_, c_, pref, kHeuristicResults, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // Only results whose own state is CUBLAS_STATUS_SUCCESS are valid (cublasLt.h).
  for (int i = 0; status == CUBLAS_STATUS_SUCCESS && i < found; ++i)
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) algorithms_.push_back(results[static_cast<size_t>(i)]);
  if (algorithms_.empty()) {
    release();  // a throwing constructor runs no destructor
    // INVALID_VALUE too: it is cuBLASLt's answer to a description that breaks its rules (an aux
    // leading dimension, say), which on a device this code has not met may also mean an epilogue
    // it does not take for these types. Callers fall back to plain products; the GemmPlan tests,
    // which ask for each epilogue directly, fail on it.
    throw NoGemmAlgorithm("cuBLASLt has no algorithm for a " + desc.str() + " (" +
                          (status != CUBLAS_STATUS_SUCCESS ? std::string(cublasLtGetStatusString(status))
                                                           : std::to_string(found) + " results, none usable") +
                          ")");
  }
  cache.put(key_, GemmAlgorithmCache::Entry{algorithms_, 0});
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

size_t GemmPlan::workspace_bytes() const { return staging_at() + padding_->staging_bytes(); }

size_t GemmPlan::staging_at() const {
  size_t bytes = 0;
  for (const cublasLtMatmulHeuristicResult_t& r : algorithms_) bytes = std::max(bytes, r.workspaceSize);
  constexpr size_t a = GemmPadding::kAlignment;
  return padding_->active() ? (bytes + a - 1) / a * a : bytes;
}

GemmPlan::OperandBytes GemmPlan::operand_bytes() const {
  const GemmDesc& r = padding_->run();
  const auto ab = static_cast<size_t>(dtype_size(r.ab_type)), dd = static_cast<size_t>(dtype_size(r.d_type));
  const auto batch = static_cast<size_t>(r.batch);
  OperandBytes o;
  o.a = static_cast<size_t>(r.m * r.k) * ab * (r.stride_a ? batch : 1);
  o.b = static_cast<size_t>(r.k * r.n) * ab * (r.stride_b ? batch : 1);
  o.d = static_cast<size_t>(r.m * r.n) * dd * batch;
  if (uses_bias(r.epilogue)) o.bias = static_cast<size_t>(std::max(r.m, r.n)) * dd * batch;
  o.aux = gemm_aux_bytes(r.epilogue, r.d_type, r.m * r.batch, r.n);
  for (const cublasLtMatmulHeuristicResult_t& h : algorithms_) o.workspace = std::max(o.workspace, h.workspaceSize);
  return o;
}

cublasStatus_t GemmPlan::run_algorithm(size_t i, cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b,
                                       void* d, void* bias, void* aux, void* workspace) const {
  set_epilogue_pointers(bias, aux);
  return matmul(algorithms_.at(i), lt, stream, a, b, d, d, workspace);
}

void GemmPlan::set_epilogue_pointers(void* bias, void* aux) const {
  if (uses_bias(desc_.epilogue)) set_desc(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (gemm_aux_ld(desc_.epilogue, desc_.n)) {
    if (reinterpret_cast<uintptr_t>(aux) % kAuxAlignment != 0)
      throw Error("internal: an aux matrix must be " + std::to_string(kAuxAlignment) + "-byte aligned");
    set_desc(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }
}

cublasStatus_t GemmPlan::matmul(const cublasLtMatmulHeuristicResult_t& r, cublasLtHandle_t lt, cudaStream_t stream,
                                const void* a, const void* b, const void* c, void* d, void* workspace) const {
  const float alpha = desc_.alpha, beta = desc_.beta;
  return cublasLtMatmul(lt, op_, &alpha, b, a_, a, b_, &beta, desc_.beta != 0.0f ? c : d, c_, d, c_, &r.algo, workspace,
                        r.workspaceSize, stream);
}

void GemmPlan::prefer(size_t i) {
  if (i >= algorithms_.size()) return;
  current_ = i;
  cache_->set_working(key_, i);
}

void GemmPlan::enqueue(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d,
                       void* bias, void* aux, void* workspace) const {
  void* const d_out = d;
  void* const bias_out = bias;
  uint8_t* const staging = static_cast<uint8_t*>(workspace) + staging_at();
  padding_->before(a, b, d, bias, staging, stream);
  run(lt, stream, a, b, c, d, bias, aux, workspace);
  padding_->after(d_out, bias_out, staging, stream);
}

void GemmPlan::run(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d,
                   void* bias, void* aux, void* workspace) const {
  set_epilogue_pointers(bias, aux);
  for (size_t i = current_.load();; ++i) {
    const cublasStatus_t status = matmul(algorithms_[i], lt, stream, a, b, c, d, workspace);
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if (status == CUBLAS_STATUS_INVALID_VALUE || i + 1 == algorithms_.size()) {
      const std::string call = "cublasLtMatmul for a " + desc_.str() + " with heuristic result " + std::to_string(i + 1) +
                               " of " + std::to_string(algorithms_.size());
      check_cublas(status, call.c_str(), __FILE__, __LINE__);
    }
    cudaGetLastError();  // a failed launch leaves its error for the next call to report
    if (report_)
      report_->record("gemm_algorithm_refused",
                      {{"product", desc_.str()}, {"algorithm", std::to_string(i)}, {"status", cublasLtGetStatusString(status)},
                       {"next", std::to_string(i + 1) + " of " + std::to_string(algorithms_.size())}});
    current_ = i + 1;
    cache_->set_working(key_, i + 1);
  }
}

}  // namespace amp::cuda
