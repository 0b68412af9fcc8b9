// A host stand-in of the cuBLASLt calls backends/cuda/gemm.cc makes, written from cuBLASLt's
// documentation (cublasLt.h's comments and the cuBLAS guide), not from gemm.cc:
//
//   D = alpha * op(A) op(B) + beta * C, column-major, op(A) m x k, op(B) k x n, C and D m x n,
//   element (r, c) of a matrix at r + c * ld; batch b at b * CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
//   elements; with beta == 0, C is not read (it need not hold valid values).
//   Epilogues: BIAS adds bias[r] (length m, the rows of D) to every column before the final
//   transform; RELU_BIAS then takes max(x, 0); BGRADA stores bias[r] = sum over k of op(A)[r, k]
//   (length m), BGRADB stores bias[c] = sum over k of op(B)[k, c] (length n). The bias vector's
//   type is CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, by default D's type; with a batch, bias b is at
//   b * CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE.
//   Aux epilogues (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, _AUX_LD, _AUX_BATCH_STRIDE): the
//   aux matrix has D's shape, element (r, c) at r + c * aux_ld, batch b at b * aux batch stride.
//   RELU_AUX and RELU_AUX_BIAS write it as the ReLU bit-mask, set where the ReLU passed its input
//   (x > 0), ld and batch stride in bits, multiples of 128, ld >= m; DRELU reads it: D = x where
//   the bit is set, else 0. GELU_AUX and GELU_AUX_BIAS write the GELU's input x in D's type (the
//   only CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE outside fp8), ld and batch stride in elements,
//   multiples of 8, ld >= m, and D = gelu(x) in its tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x +
//   0.044715 x^3))) (GELU_BIAS: that D, no aux); DGELU reads it: D = x * gelu'(aux). DRELU_BGRAD
//   and DGELU_BGRAD also store the bias gradient, bias[r] = sum over the columns of what they put
//   in D (length m, D's rows).
//   An aux epilogue without an aux pointer, with a leading dimension or batch stride breaking
//   those rules, or with another aux data type is CUBLAS_STATUS_INVALID_VALUE (the documented
//   status of a configuration in conflict); a ReLU bit-mask with an aux data type set too.
//
// Numerics: operands (fp16, bf16, fp32) are widened to fp32 exactly; with
// CUBLAS_COMPUTE_32F_FAST_TF32, fp32 operands are first rounded to TF32 (10 stored mantissa bits,
// to nearest, ties away from zero: cvt.rna.tf32.f32). Products are accumulated in fp32 in k order,
// alpha, beta, bias and ReLU applied in fp32, and the result rounded to D's type once (to nearest
// even). A Tensor Core sums in another order (and fp16 products in a wider accumulator), so the
// last bits differ from a GPU's; the tests compare with tolerances. What the documentation leaves
// open is taken as an epilogue computing in fp32 does: the ReLU bit, gelu, gelu' and the bias
// gradient's sums come from the fp32 values before D is rounded; bit i of the mask (i = r +
// c * ld) is bit i % 8 of byte i / 8, and the bits past m in each column are left as they were.
//
// The heuristic returns three algorithms, best first, each needing no workspace (the second and
// third differing from the first only in the index they carry, data[7]), for every combination
// this implements (CUBLAS_STATUS_NOT_SUPPORTED for the others: row-major orders, other types or
// epilogues, mismatched batch counts), and the matmul runs on the stream (or is captured). The
// algorithm remembers the pointer alignments its preference let it assume (256 bytes unless set)
// and those the bias and aux pointers' values told the heuristic (256 when unset), and the matmul
// refuses less aligned A, B, C, D, bias or aux pointers; operands must lie in device memory as
// far as their layouts reach. What tests set to see the backend cope with what a device may answer:
//   AMP_STANDIN_CUBLASLT_REFUSE, a comma-separated list of epilogue names (RELU_AUX_BIAS,BIAS,...):
//     the heuristic finds no algorithm for those, as a cuBLASLt without kernels for them would;
//   AMP_STANDIN_CUBLASLT_FIRST_RESULT=unusable: the heuristic's first result has a state of
//     CUBLAS_STATUS_NOT_SUPPORTED (cublasLt.h: its other fields are then not valid, and a matmul
//     given its algo refuses it); =refused: cublasLtMatmul refuses the first result's algorithm
//     (CUBLAS_STATUS_NOT_SUPPORTED) when run;
//   AMP_STANDIN_CUBLASLT_RELU_MASK_AT_ZERO=1: the RELU_AUX epilogues set the mask bit where
//     x >= 0 rather than x > 0 (cublasLt.h does not say which; the backend probes it);
//   AMP_STANDIN_CUBLASLT_SLOW_FIRST=MS: a matmul run with the heuristic's first result takes MS
//     milliseconds more (the others as fast as ever), for timing the algorithms (gemm_tuning.h).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

struct cublasLtContext {
  int magic = 0x17;
};

namespace {

constexpr uint64_t kAlgoMagic = 0xa1905eed5ull;
constexpr int kResults = 3;

// AMP_STANDIN_CUBLASLT_FIRST_RESULT, "" when unset.
std::string first_result_mode() {
  const char* v = std::getenv("AMP_STANDIN_CUBLASLT_FIRST_RESULT");
  return v ? v : "";
}

int slow_first_ms() {
  const char* v = std::getenv("AMP_STANDIN_CUBLASLT_SLOW_FIRST");
  return v ? std::atoi(v) : 0;
}

bool relu_mask_at_zero() {
  const char* v = std::getenv("AMP_STANDIN_CUBLASLT_RELU_MASK_AT_ZERO");
  return v && std::string(v) == "1";
}

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t batch_stride = 0;  // elements
};

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N, trans_c = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;
  int64_t bias_batch_stride = 0;
  const void* aux = nullptr;
  int64_t aux_ld = 0, aux_batch_stride = 0;
  int32_t aux_type = -1;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
};

Layout* L(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l); }
Desc* D(cublasLtMatmulDesc_t d) { return reinterpret_cast<Desc*>(d); }

template <class T>
bool read_attr(T& out, const void* buf, size_t size) {
  if (!buf || size != sizeof(T)) return false;
  std::memcpy(&out, buf, sizeof(T));
  return true;
}

bool supported_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// What each implemented epilogue does with the bias vector and the aux matrix.
bool adds_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool writes_bias_gradient(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB || e == CUBLASLT_EPILOGUE_DRELU_BGRAD ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
bool relu_mask(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU ||
         e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}
bool gelu_input(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

// AMP_STANDIN_CUBLASLT_REFUSE names the epilogue.
bool refused(uint32_t e) {
  const char* list = std::getenv("AMP_STANDIN_CUBLASLT_REFUSE");
  if (!list) return false;
  static const std::pair<const char*, uint32_t> kNames[] = {
      {"BIAS", CUBLASLT_EPILOGUE_BIAS},           {"RELU_BIAS", CUBLASLT_EPILOGUE_RELU_BIAS},
      {"BGRADA", CUBLASLT_EPILOGUE_BGRADA},       {"BGRADB", CUBLASLT_EPILOGUE_BGRADB},
      {"RELU_AUX", CUBLASLT_EPILOGUE_RELU_AUX},   {"RELU_AUX_BIAS", CUBLASLT_EPILOGUE_RELU_AUX_BIAS},
      {"DRELU", CUBLASLT_EPILOGUE_DRELU},         {"DRELU_BGRAD", CUBLASLT_EPILOGUE_DRELU_BGRAD},
      {"GELU_BIAS", CUBLASLT_EPILOGUE_GELU_BIAS}, {"GELU_AUX", CUBLASLT_EPILOGUE_GELU_AUX},
      {"GELU_AUX_BIAS", CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
      {"DGELU", CUBLASLT_EPILOGUE_DGELU},         {"DGELU_BGRAD", CUBLASLT_EPILOGUE_DGELU_BGRAD},
  };
  const std::string names = "," + std::string(list) + ",";
  for (const auto& [name, value] : kNames)
    if (value == e && names.find("," + std::string(name) + ",") != std::string::npos) return true;
  return false;
}

constexpr float kSqrt2OverPi = 0.7978845608f;

float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))); }

float gelu_grad(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
}
size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

float load(const void* base, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
}

void store(void* base, cudaDataType t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(base)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
  }
}

// cvt.rna.tf32.f32: keep 10 mantissa bits, rounding to nearest with ties away from zero.
float to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, nan
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// The preference: the workspace cap, and the alignments (bytes) the algorithm may assume of A, B,
// C and D's pointers (cublasLt.h: CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256). The
// heuristic's algorithm carries them; cublasLtMatmul refuses pointers less aligned (on a GPU an
// algorithm that assumed the alignment would fault with a misaligned address, or be refused).
struct Preference {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};
};

struct Problem {
  int64_t m, n, k;
  int batch;
};

// Checks the combination; fills the problem's sizes.
cublasStatus_t validate(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dd, Problem* p) {
  if (d.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.trans_c != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const Layout* l : {&a, &b, &c, &dd}) {
    if (l->order != CUBLASLT_ORDER_COL || !supported_type(l->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->ld < static_cast<int64_t>(l->rows) || l->rows == 0 || l->cols == 0) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (a.type != b.type || c.type != dd.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (dd.type != a.type && dd.type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a.type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = d.trans_a != CUBLAS_OP_N, tb = d.trans_b != CUBLAS_OP_N;
  const int64_t m = static_cast<int64_t>(dd.rows), n = static_cast<int64_t>(dd.cols);
  const int64_t am = ta ? a.cols : a.rows, ak = ta ? a.rows : a.cols;
  const int64_t bk = tb ? b.cols : b.rows, bn = tb ? b.rows : b.cols;
  if (am != m || bn != n || ak != bk || c.rows != dd.rows || c.cols != dd.cols || c.ld != dd.ld)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.batch != dd.batch || b.batch != dd.batch || c.batch != dd.batch) return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB:
    case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU:
    case CUBLASLT_EPILOGUE_DRELU_BGRAD:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (adds_bias(d.epilogue) || writes_bias_gradient(d.epilogue)) {
    const int32_t bt = d.bias_type == -1 ? static_cast<int32_t>(dd.type) : d.bias_type;
    if (!supported_type(static_cast<cudaDataType>(bt))) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // The aux matrix: AUX_LD at least D's rows and a multiple of 128 bits (the ReLU bit-mask, whose
  // type is not to be set) or of 8 elements (GELU's input, in D's type); with a batch, a batch
  // stride that is a multiple of the same and keeps the batches apart.
  if (relu_mask(d.epilogue) || gelu_input(d.epilogue)) {
    const int64_t multiple = relu_mask(d.epilogue) ? 128 : 8;
    if (relu_mask(d.epilogue) ? d.aux_type != -1 : d.aux_type != -1 && d.aux_type != static_cast<int32_t>(dd.type))
      return CUBLAS_STATUS_INVALID_VALUE;
    if (d.aux_ld < m || d.aux_ld % multiple != 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (dd.batch > 1 && (d.aux_batch_stride % multiple != 0 || d.aux_batch_stride < d.aux_ld * n))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  *p = Problem{m, n, ak, dd.batch};
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

// The version the stand-in answers as (cuBLASLt 13.1.0: major * 10000 + minor * 100 + patch).
size_t cublasLtGetVersion(void) { return 130100; }

const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED (stand-in: combination not implemented)";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS (stand-in: other)";
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete L(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  Layout& x = *L(l);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
      uint32_t t;
      ok = read_attr(t, buf, size);
      if (ok) x.type = static_cast<cudaDataType>(t);
      break;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: ok = read_attr(x.order, buf, size); break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: ok = read_attr(x.rows, buf, size); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: ok = read_attr(x.cols, buf, size); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: ok = read_attr(x.ld, buf, size); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: ok = read_attr(x.batch, buf, size) && x.batch >= 1; break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: ok = read_attr(x.batch_stride, buf, size); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  Desc* x = new Desc;
  x->compute = compute;
  x->scale = scale;
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(x);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete D(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  Desc& x = *D(d);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = read_attr(x.trans_a, buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = read_attr(x.trans_b, buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSC: ok = read_attr(x.trans_c, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = read_attr(x.epilogue, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = read_attr(x.bias, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: ok = read_attr(x.bias_type, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: ok = read_attr(x.bias_batch_stride, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = read_attr(x.aux, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = read_attr(x.aux_ld, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: ok = read_attr(x.aux_batch_stride, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: ok = read_attr(x.aux_type, buf, size); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: ok = read_attr(x.pointer_mode, buf, size); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<Preference*>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  Preference& x = *reinterpret_cast<Preference*>(p);
  bool ok = true;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = read_attr(x.max_workspace, buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: ok = read_attr(x.align[0], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: ok = read_attr(x.align[1], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: ok = read_attr(x.align[2], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: ok = read_attr(x.align[3], buf, size); break;
    default: break;  // search modes, reduction schemes: one algorithm fits them all
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* count) {
  if (!h || !d || !a || !b || !c || !dd || !pref || requested < 1 || !results || !count) return CUBLAS_STATUS_INVALID_VALUE;
  *count = 0;
  Problem p;
  const cublasStatus_t s = validate(*D(d), *L(a), *L(b), *L(c), *L(dd), &p);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (refused(D(d)->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  // The bias and aux pointers' alignments as the heuristic sees them (cublasLt.h: the heuristic
  // depends on their values to determine expected pointer alignment); unset (NULL), taken as 256
  // like the rest.
  auto alignment = [](const void* p) -> uint64_t {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    return v == 0 ? 256 : v & (~v + 1) & 255 ? v & (~v + 1) : 256;
  };
  const int n = requested < kResults ? requested : kResults;
  for (int r = 0; r < n; ++r) {
    cublasLtMatmulHeuristicResult_t& out = results[r];
    out = cublasLtMatmulHeuristicResult_t{};
    if (r == 0 && first_result_mode() == "unusable") {
      out.state = CUBLAS_STATUS_NOT_SUPPORTED;
      continue;
    }
    out.algo.data[0] = kAlgoMagic;
    for (int i = 0; i < 4; ++i) out.algo.data[1 + i] = reinterpret_cast<const Preference*>(pref)->align[i];
    out.algo.data[5] = alignment(D(d)->bias);
    out.algo.data[6] = alignment(D(d)->aux);
    out.algo.data[7] = static_cast<uint64_t>(r);
    out.workspaceSize = 0;
    out.state = CUBLAS_STATUS_SUCCESS;
    out.wavesCount = 1.0f;
  }
  *count = n;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha_p, const void* A,
                              cublasLtMatrixLayout_t a_l, const void* B, cublasLtMatrixLayout_t b_l, const void* beta_p,
                              const void* C, cublasLtMatrixLayout_t c_l, void* Dp, cublasLtMatrixLayout_t d_l,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (!h || !desc || !alpha_p || !beta_p || !a_l || !b_l || !c_l || !d_l || !A || !B || !Dp)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (algo && algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo && algo->data[7] == 0 && first_result_mode() == "refused") return CUBLAS_STATUS_NOT_SUPPORTED;
  // Everything is read now (the descriptors may change or go after the call); the data at replay.
  const Desc d = *D(desc);
  const Layout a = *L(a_l), b = *L(b_l), c = *L(c_l), dl = *L(d_l);
  Problem p;
  if (const cublasStatus_t s = validate(d, a, b, c, dl, &p)) return s;
  if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
  if (beta != 0.0f && !C) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo) {
    const void* ptrs[6] = {A, B, beta != 0.0f ? C : nullptr, Dp, d.bias, d.aux};
    const char* names[6] = {"A", "B", "C", "D", "bias", "aux"};
    for (int i = 0; i < 6; ++i)
      if (ptrs[i] && reinterpret_cast<uintptr_t>(ptrs[i]) % algo->data[1 + i] != 0) {
        std::fprintf(stderr, "stand-in cublasLtMatmul: %s at %p is not %llu-byte aligned, as the algorithm assumed\n",
                     names[i], ptrs[i], static_cast<unsigned long long>(algo->data[1 + i]));
        return CUBLAS_STATUS_INVALID_VALUE;
      }
  }
  const bool bias_epilogue = adds_bias(d.epilogue), bgrad = writes_bias_gradient(d.epilogue);
  const bool mask = relu_mask(d.epilogue), gelu_aux = gelu_input(d.epilogue);
  if ((bias_epilogue || bgrad) && !d.bias) return CUBLAS_STATUS_INVALID_VALUE;
  if ((mask || gelu_aux) && !d.aux) return CUBLAS_STATUS_INVALID_VALUE;
  const cudaDataType bias_type = d.bias_type == -1 ? dl.type : static_cast<cudaDataType>(d.bias_type);
  // Every operand in device memory, as far as the layouts reach.
  auto extent = [](const Layout& l) {
    return ((l.batch - 1) * l.batch_stride + (static_cast<int64_t>(l.cols) - 1) * l.ld + static_cast<int64_t>(l.rows)) *
           static_cast<int64_t>(type_size(l.type));
  };
  if (!amp_standin::is_device_range(A, extent(a)) || !amp_standin::is_device_range(B, extent(b)) ||
      !amp_standin::is_device_range(Dp, extent(dl)) || (beta != 0.0f && !amp_standin::is_device_range(C, extent(c))))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (bias_epilogue || bgrad) {
    const int64_t len = d.epilogue == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m;
    if (!amp_standin::is_device_range(d.bias, ((p.batch - 1) * d.bias_batch_stride + len) * type_size(bias_type)))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (mask || gelu_aux) {
    const int64_t elements = (p.batch - 1) * d.aux_batch_stride + (p.n - 1) * d.aux_ld + p.m;
    if (!amp_standin::is_device_range(d.aux, mask ? (elements + 7) / 8 : elements * type_size(dl.type)))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool at_zero = relu_mask_at_zero();
  const int slow_ms = algo && algo->data[7] == 0 ? slow_first_ms() : 0;
  const cudaError_t e = amp_standin::enqueue(stream, [=] {
    if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    const bool ta = d.trans_a != CUBLAS_OP_N, tb = d.trans_b != CUBLAS_OP_N;
    auto in = [&](const void* base, const Layout& l, int64_t batch, int64_t r, int64_t col) {
      const float v = load(base, l.type, batch * l.batch_stride + r + col * l.ld);
      return tf32 ? to_tf32(v) : v;
    };
    // op(A)[r, kk] and op(B)[kk, col]
    auto opa = [&](int64_t bt, int64_t r, int64_t kk) { return ta ? in(A, a, bt, kk, r) : in(A, a, bt, r, kk); };
    auto opb = [&](int64_t bt, int64_t kk, int64_t col) { return tb ? in(B, b, bt, col, kk) : in(B, b, bt, kk, col); };
    auto* aux = static_cast<uint8_t*>(const_cast<void*>(d.aux));
    std::vector<float> out(static_cast<size_t>(p.m * p.n));
    for (int64_t bt = 0; bt < p.batch; ++bt) {
      for (int64_t col = 0; col < p.n; ++col)
        for (int64_t r = 0; r < p.m; ++r) {
          float acc = 0.0f;
          for (int64_t kk = 0; kk < p.k; ++kk) acc += opa(bt, r, kk) * opb(bt, kk, col);
          float v = alpha * acc;
          if (beta != 0.0f) v += beta * load(C, c.type, bt * c.batch_stride + r + col * c.ld);
          if (bias_epilogue) v += load(d.bias, bias_type, bt * d.bias_batch_stride + r);
          const int64_t at = bt * d.aux_batch_stride + r + col * d.aux_ld;  // in the aux matrix
          switch (d.epilogue) {
            case CUBLASLT_EPILOGUE_RELU_BIAS: v = v > 0.0f ? v : 0.0f; break;  // max(x, 0); NaN -> 0 as fmaxf
            case CUBLASLT_EPILOGUE_RELU_AUX:
            case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: {
              const bool pass = at_zero ? v >= 0.0f : v > 0.0f;
              const auto bit = static_cast<uint8_t>(1u << (at % 8));
              aux[at / 8] = static_cast<uint8_t>(pass ? aux[at / 8] | bit : aux[at / 8] & ~bit);
              v = pass ? v : 0.0f;
              break;
            }
            case CUBLASLT_EPILOGUE_DRELU:
            case CUBLASLT_EPILOGUE_DRELU_BGRAD: v = (aux[at / 8] >> (at % 8)) & 1 ? v : 0.0f; break;
            case CUBLASLT_EPILOGUE_GELU_BIAS: v = gelu(v); break;
            case CUBLASLT_EPILOGUE_GELU_AUX:
            case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
              store(aux, dl.type, at, v);
              v = gelu(v);
              break;
            case CUBLASLT_EPILOGUE_DGELU:
            case CUBLASLT_EPILOGUE_DGELU_BGRAD: v *= gelu_grad(load(aux, dl.type, at)); break;
            default: break;
          }
          out[static_cast<size_t>(r + col * p.m)] = v;
        }
      // Only now D: it may be C itself (in-place, ld equal).
      for (int64_t col = 0; col < p.n; ++col)
        for (int64_t r = 0; r < p.m; ++r)
          store(Dp, dl.type, bt * dl.batch_stride + r + col * dl.ld, out[static_cast<size_t>(r + col * p.m)]);
      if (d.epilogue == CUBLASLT_EPILOGUE_BGRADA)
        for (int64_t r = 0; r < p.m; ++r) {
          float s = 0.0f;
          for (int64_t kk = 0; kk < p.k; ++kk) s += opa(bt, r, kk);
          store(const_cast<void*>(d.bias), bias_type, bt * d.bias_batch_stride + r, s);
        }
      if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB)
        for (int64_t col = 0; col < p.n; ++col) {
          float s = 0.0f;
          for (int64_t kk = 0; kk < p.k; ++kk) s += opb(bt, kk, col);
          store(const_cast<void*>(d.bias), bias_type, bt * d.bias_batch_stride + col, s);
        }
      if (d.epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD || d.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD)
        for (int64_t r = 0; r < p.m; ++r) {
          float s = 0.0f;
          for (int64_t col = 0; col < p.n; ++col) s += out[static_cast<size_t>(r + col * p.m)];
          store(const_cast<void*>(d.bias), bias_type, bt * d.bias_batch_stride + r, s);
        }
    }
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
