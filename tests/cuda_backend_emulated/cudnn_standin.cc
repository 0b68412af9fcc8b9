// A host stand-in of the cuDNN calls backends/cuda/ makes (cudnn_descriptors.cc,
// convolution_ops.cc, normalization_ops.cc), written from cuDNN's documentation (the graph API of
// cudnn_attention.cc: cudnn_graph_standin.cc):
//
//  - tensors: N-d with explicit strides; filters: packed [K, C/groups, spatial...], stored so
//    (CUDNN_TENSOR_NCHW) or as K, spatial..., C/groups (CUDNN_TENSOR_NHWC: KRSC for 4-D), the
//    dims given in K, C/groups, spatial... order either way. As cuDNN's tables for an NHWC filter
//    list: x and y (dx and dy) must then be fully-packed NHWC (else CUDNN_STATUS_NOT_SUPPORTED),
//    and only forward IMPLICIT_GEMM and IMPLICIT_PRECOMP_GEMM, backward data ALGO_0 and ALGO_1 and
//    backward filter ALGO_0 and ALGO_1 run (the others ranked NOT_SUPPORTED_SHAPE);
//  - convolution: cross-correlation (CUDNN_CONVOLUTION, the flipped one, is not implemented),
//    with pads, strides, dilations and groups; forward, backward data and backward filter, each
//    result = alpha * computed + beta * prior (prior not read when beta is 0);
//  - the fused forward convolution, cudnnConvolutionBiasActivationForward:
//    y = act(alpha1 * conv(x) + alpha2 * z + bias), summed in fp32 and rounded once, z not read
//    when alpha2 is 0. It refuses what its documentation lists, with cuDNN 9's sub-codes of the
//    NOT_SUPPORTED category (cudnn_graph.h): an activation other than RELU and IDENTITY and a
//    reluNanOpt other than CUDNN_NOT_PROPAGATE_NAN (so the fused ReLU maps NaN to 0)
//    (_GRAPH_PATTERN), IDENTITY with an algorithm other than IMPLICIT_PRECOMP_GEMM
//    (cudnnActivationMode_t; _GRAPH_PATTERN), a bias that is not [1, K, 1, ...] (first dim 1,
//    second the filter's K, second stride 1) of y's type and a z whose descriptor is not y's
//    (_LAYOUT), a data-type configuration outside its table (FLOAT, PSEUDO_HALF/TRUE_HALF,
//    PSEUDO_BFLOAT16; _DATA_TYPE);
//  - the algorithms: the _v7 heuristics rank several, each with a math type — forward IMPLICIT_GEMM,
//    IMPLICIT_PRECOMP_GEMM (first for 16-bit data, as the Tensor Core kernels often are, so the
//    fused IDENTITY form's path runs too), GEMM; backward data ALGO_1, ALGO_0; backward filter
//    ALGO_1, ALGO_0, ALGO_3; then FFT with a status of CUDNN_STATUS_NOT_SUPPORTED_SHAPE, as results
//    that cannot run come last — all computed alike (below). The math type is the descriptor's
//    for fp32 data and TENSOR_OP_MATH for 16-bit data, but DEFAULT_MATH for GEMM and ALGO_0; a call
//    whose descriptor's math type is not the one its algorithm was ranked with is refused
//    (CUDNN_STATUS_NOT_SUPPORTED: cuDNN picks kernels by algorithm and math type, and only the
//    ranked pair is known to run). IMPLICIT_PRECOMP_GEMM precomputes indices, here one 32-bit index
//    per filter tap and output position (cuDNN documents no figure), GEMM an fp32 im2col matrix
//    of the same size; every call handed less workspace than its algorithm needs fails
//    (CUDNN_STATUS_BAD_PARAM);
//  - AMP_STANDIN_CUDNN_FAIL, a comma-separated list of WHEN:DIRECTION:ALGO (WHEN workspace, run or
//    exec; DIRECTION fwd, bwd_data or bwd_filter; ALGO the algorithm's number), makes the
//    workspace query (workspace) or the call (run) refuse that algorithm with
//    CUDNN_STATUS_NOT_SUPPORTED_SHAPE, or the call fail with CUDNN_STATUS_EXECUTION_FAILED (exec),
//    as a real cuDNN may for algorithms its heuristic ranked; AMP_STANDIN_CUDNN_REFUSE_FUSED=STATUS
//    makes the fused call refuse everything with that status number (1 for 3000), as a real cuDNN
//    may where its documentation says it takes the configuration;
//  - cudnnFind*AlgorithmEx: the heuristic's algorithms, each checked as a call with its ranked math
//    type would be (so AMP_STANDIN_CUDNN_FAIL's run and exec failures show as its status), timed
//    as AMP_STANDIN_CUDNN_TIMES says (DIRECTION[.TYPE]:ALGO=MILLISECONDS, comma-separated; TYPE
//    float, half or bfloat16) or else 1 ms, 2 ms, ... in rank order; successes fastest first, then
//    failures; with AMP_STANDIN_CUDNN_BOTH_MATHS=1 an algorithm ranked with DEFAULT_MATH for
//    16-bit data is also timed (DIRECTION:ALGO@1=MILLISECONDS) and runs with TENSOR_OP_MATH, as a
//    real cuDNN's Find answers;
//  - cudnnAddTensor: C = alpha * A + beta * C, A broadcast along its dimensions of size 1;
//  - cudnnActivationForward, ReLU: y = alpha * relu(x) + beta * y, in place allowed;
//  - pooling: max (NaN propagated under CUDNN_PROPAGATE_NAN; the gradient goes to the first
//    maximum of a window) and average, counting the padding or not; padded positions never win;
//  - batch normalisation, spatial: per channel over N and the spatial dimensions; training
//    normalises with the biased batch variance and blends the running variance with the unbiased
//    one (factor m / (m - 1)), as documented; backward recomputes the statistics when no saved
//    mean is passed.
//
// Numerics: fp32 accumulation in a fixed order, the result rounded to the tensor's type once.
// Real cuDNN's algorithms (FFT, Winograd, implicit GEMM on Tensor Cores, TF32 under
// CUDNN_TENSOR_OP_MATH with fp32 data) each round in their own way; here every algorithm computes
// the same sums.
#include <cudnn.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  cudnnDataType_t type{};
  std::vector<int> dims, strides;
};
struct cudnnFilterStruct {
  cudnnDataType_t type{};
  cudnnTensorFormat_t format{};
  std::vector<int> dims;
};
struct cudnnConvolutionStruct {
  std::vector<int> pad, stride, dilation;
  cudnnConvolutionMode_t mode{};
  cudnnDataType_t compute{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int groups = 1;
};
struct cudnnActivationStruct {
  cudnnActivationMode_t mode{};
  cudnnNanPropagation_t nan{};
  double coef = 0.0;
};
struct cudnnPoolingStruct {
  cudnnPoolingMode_t mode{};
  cudnnNanPropagation_t nan{};
  std::vector<int> window, pad, stride;
};

#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace {

bool supported(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }

float ld(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return static_cast<const float*>(p)[i];
    case CUDNN_DATA_HALF: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

void st(void* p, cudnnDataType_t t, int64_t i, float v) {
  switch (t) {
    case CUDNN_DATA_FLOAT: static_cast<float*>(p)[i] = v; break;
    case CUDNN_DATA_HALF: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
  }
}

int64_t count(const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= d;
  return n;
}

// Multi-index of the i-th element in row-major order of dims.
void unravel(int64_t i, const std::vector<int>& dims, std::vector<int>& idx) {
  idx.resize(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = static_cast<int>(i % dims[d]);
    i /= dims[d];
  }
}

int64_t offset(const cudnnTensorStruct& t, const std::vector<int>& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o += static_cast<int64_t>(idx[d]) * t.strides[d];
  return o;
}

int64_t extent_bytes(const cudnnTensorStruct& t) {
  int64_t last = 0;
  for (size_t d = 0; d < t.dims.size(); ++d) last += static_cast<int64_t>(t.dims[d] - 1) * t.strides[d];
  return (last + 1) * (t.type == CUDNN_DATA_FLOAT ? 4 : 2);
}

bool on_device(const void* p, const cudnnTensorStruct& t) { return p && amp_standin::is_device_range(p, extent_bytes(t)); }

// result = alpha * v + beta * prior (prior not read when beta == 0)
void blend(void* p, cudnnDataType_t t, int64_t o, float alpha, float beta, float v) {
  st(p, t, o, beta == 0.0f ? alpha * v : alpha * v + beta * ld(p, t, o));
}

float f(const void* p) { return *static_cast<const float*>(p); }

cudnnStatus_t run(cudnnHandle_t h, std::function<void()> work) {
  return amp_standin::enqueue(h->stream, std::move(work)) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                                          : CUDNN_STATUS_EXECUTION_FAILED;
}

// The convolution's geometry, checked: x [N, C, in...], w [K, C/G, r...], y [N, K, out...];
// nhwc_filter: w stored K, r..., C/G (CUDNN_TENSOR_NHWC).
struct Conv {
  std::vector<int> x, w, y, pad, stride, dil;
  int groups;
  bool nhwc_filter = false;
};

// Whether t is a fully-packed [N, C, spatial...] stored N, spatial..., C.
bool nhwc_packed(const cudnnTensorStruct& t) {
  int64_t step = t.dims[1];
  if (t.strides[1] != 1) return false;
  for (size_t d = t.dims.size(); d-- > 2;) {
    if (t.strides[d] != step) return false;
    step *= t.dims[d];
  }
  return t.strides[0] == step;
}

cudnnStatus_t conv_geometry(const cudnnTensorStruct& x, const cudnnFilterStruct& w, const cudnnConvolutionStruct& c,
                            const cudnnTensorStruct& y, Conv* g) {
  const size_t nd = x.dims.size();
  if (c.mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_NOT_SUPPORTED;
  if ((w.format != CUDNN_TENSOR_NCHW && w.format != CUDNN_TENSOR_NHWC) || w.dims.size() != nd || y.dims.size() != nd ||
      c.pad.size() != nd - 2)
    return CUDNN_STATUS_BAD_PARAM;
  if (!supported(x.type) || x.type != w.type || x.type != y.type) return CUDNN_STATUS_NOT_SUPPORTED;
  const bool nhwc_filter = w.format == CUDNN_TENSOR_NHWC;
  if (nhwc_filter && (!nhwc_packed(x) || !nhwc_packed(y))) return CUDNN_STATUS_NOT_SUPPORTED;
  const int G = c.groups;
  if (G < 1 || x.dims[1] % G || w.dims[0] % G || w.dims[1] * G != x.dims[1] || y.dims[1] != w.dims[0] ||
      y.dims[0] != x.dims[0])
    return CUDNN_STATUS_BAD_PARAM;
  for (size_t d = 2; d < nd; ++d) {
    const int s = c.stride[d - 2], p = c.pad[d - 2], dl = c.dilation[d - 2];
    const int out = (x.dims[d] + 2 * p - dl * (w.dims[d] - 1) - 1) / s + 1;
    if (out != y.dims[d]) return CUDNN_STATUS_BAD_PARAM;
  }
  *g = Conv{x.dims, w.dims, y.dims, c.pad, c.stride, c.dilation, G, nhwc_filter};
  return CUDNN_STATUS_SUCCESS;
}

enum Direction { kForward, kBackwardData, kBackwardFilter };

// AMP_STANDIN_CUDNN_FAIL names (when, direction, algo): the status to answer instead, else SUCCESS.
cudnnStatus_t injected_failure(const char* when, Direction dir, int algo) {
  const char* list = std::getenv("AMP_STANDIN_CUDNN_FAIL");
  if (!list) return CUDNN_STATUS_SUCCESS;
  static const char* kDirections[] = {"fwd", "bwd_data", "bwd_filter"};
  const std::string all = "," + std::string(list) + ",";
  const std::string when_run = std::string(when) == "workspace" ? "workspace" : "run";
  for (const char* w : {when_run.c_str(), "exec"}) {
    if (std::string(w) == "exec" && when_run != "run") continue;
    const std::string item = "," + std::string(w) + ":" + kDirections[dir] + ":" + std::to_string(algo) + ",";
    if (all.find(item) != std::string::npos)
      return std::string(w) == "exec" ? CUDNN_STATUS_EXECUTION_FAILED : CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
  }
  return CUDNN_STATUS_SUCCESS;
}

// The algorithms the heuristics rank, in order, with the math type each is ranked with (for data
// of the descriptor's type and math type); the last one's status is NOT_SUPPORTED_SHAPE.
struct RankedAlgo {
  int algo;
  bool default_math;  // DEFAULT_MATH for 16-bit data, rather than TENSOR_OP_MATH
};
std::vector<RankedAlgo> ranking(Direction dir, bool half) {
  switch (dir) {
    case kForward:
      return half ? std::vector<RankedAlgo>{{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, false},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false}}
                  : std::vector<RankedAlgo>{{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, false},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true},
                                            {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false}};
    case kBackwardData:
      return {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, false}, {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, true},
              {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, false}};
    case kBackwardFilter:
      return {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, false}, {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, true},
              {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, false}, {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, false}};
  }
  return {};
}

bool is_half(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }
const char* type_name(cudnnDataType_t t) {
  return t == CUDNN_DATA_HALF ? "half" : t == CUDNN_DATA_BFLOAT16 ? "bfloat16" : t == CUDNN_DATA_FLOAT ? "float" : "other";
}

// A number the environment variable `env` tells for (dir, algo): its comma-separated items are
// DIRECTION:ALGO=NUMBER, or DIRECTION.TYPE:ALGO=NUMBER for data of one type (float, half or
// bfloat16), which wins.
std::optional<double> told(const char* env, Direction dir, int algo, cudnnDataType_t data, const char* suffix = "") {
  static const char* kDirections[] = {"fwd", "bwd_data", "bwd_filter"};
  const char* value = std::getenv(env);
  if (!value) return std::nullopt;
  const std::string all = "," + std::string(value) + ",", at_algo = ":" + std::to_string(algo) + suffix + "=";
  for (const std::string& key : {"," + std::string(kDirections[dir]) + "." + type_name(data) + at_algo,
                                 "," + std::string(kDirections[dir]) + at_algo})
    if (const size_t at = all.find(key); at != std::string::npos) return std::stod(all.substr(at + key.size()));
  return std::nullopt;
}

// Whether cuDNN's tables for an NHWC filter list the algorithm.
bool runs_nhwc_filter(Direction dir, int algo) {
  switch (dir) {
    case kForward:
      return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    case kBackwardData: return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case kBackwardFilter:
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  }
  return false;
}

// The math type the heuristic ranks `algo` with for this data, filter format and descriptor; -1
// when it ranks it as not runnable (or not at all).
int ranked_math(Direction dir, int algo, cudnnDataType_t data, const cudnnConvolutionStruct& c, bool nhwc_filter) {
  if (nhwc_filter && !runs_nhwc_filter(dir, algo)) return -1;
  const std::vector<RankedAlgo> r = ranking(dir, is_half(data));
  for (size_t i = 0; i + 1 < r.size(); ++i)
    if (r[i].algo == algo) {
      if (!is_half(data)) return c.math;
      return r[i].default_math ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    }
  return -1;
}

// Workspace of an algorithm: IMPLICIT_PRECOMP_GEMM one 32-bit index per filter tap (C/G channels
// times the window) and output position of one image, GEMM one fp32 value per the same; the
// others none; AMP_STANDIN_CUDNN_WORKSPACE (told: DIRECTION[.TYPE]:ALGO=MIB) tells others, as
// a real cuDNN's FFT algorithms need hundreds of MiB. An algorithm not ranked runnable:
// NOT_SUPPORTED_SHAPE.
cudnnStatus_t algo_workspace(Direction dir, const Conv& g, int algo, cudnnDataType_t data, const cudnnConvolutionStruct& c,
                             size_t* bytes) {
  if (ranked_math(dir, algo, data, c, g.nhwc_filter) < 0) return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
  if (cudnnStatus_t s = injected_failure("workspace", dir, algo)) return s;
  *bytes = 0;
  if (dir == kForward &&
      (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM)) {
    int64_t taps = 1, positions = 1;
    for (size_t d = 1; d < g.w.size(); ++d) taps *= g.w[d];
    for (size_t d = 2; d < g.y.size(); ++d) positions *= g.y[d];
    *bytes = static_cast<size_t>(taps * positions) * 4;
  }
  if (const std::optional<double> mib = told("AMP_STANDIN_CUDNN_WORKSPACE", dir, algo, data))
    *bytes = static_cast<size_t>(*mib * (1 << 20));
  return CUDNN_STATUS_SUCCESS;
}

// What a call with `algo` checks before it computes: the algorithm ranked runnable, the
// descriptor's math type the one it was ranked with, enough workspace, and AMP_STANDIN_CUDNN_FAIL.
// AMP_STANDIN_CUDNN_BOTH_MATHS=1: as a real cuDNN does, an algorithm the heuristic ranks with
// DEFAULT_MATH for 16-bit data also runs with TENSOR_OP_MATH, and Find times it both ways (its
// TENSOR_OP_MATH time told as DIRECTION:ALGO@1=MILLISECONDS).
bool both_maths() {
  const char* v = std::getenv("AMP_STANDIN_CUDNN_BOTH_MATHS");
  return v && std::string(v) == "1";
}

cudnnStatus_t algo_call_check(Direction dir, const Conv& g, int algo, cudnnDataType_t data, const cudnnConvolutionStruct& c,
                              const void* workspace, size_t workspace_bytes) {
  const int math = ranked_math(dir, algo, data, c, g.nhwc_filter);
  if (math < 0) return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
  const bool also_tensor_op = both_maths() && is_half(data) && math == CUDNN_DEFAULT_MATH && c.math == CUDNN_TENSOR_OP_MATH;
  if (c.math != math && !also_tensor_op) return CUDNN_STATUS_NOT_SUPPORTED;
  size_t needed = 0;
  if (cudnnStatus_t s = algo_workspace(dir, g, algo, data, c, &needed)) return s;
  if (workspace_bytes < needed || (needed && !amp_standin::is_device_range(workspace, needed))) return CUDNN_STATUS_BAD_PARAM;
  return injected_failure("run", dir, algo);
}

// The data-type configurations of the fused convolution's table: x, w, y and z of one type, the
// convolution computing in FLOAT (FLOAT_CONFIG, PSEUDO_HALF_CONFIG, PSEUDO_BFLOAT16_CONFIG) or, for
// half, in HALF (TRUE_HALF_CONFIG).
bool fused_configuration(cudnnDataType_t data, cudnnDataType_t compute) {
  return compute == CUDNN_DATA_FLOAT || (data == CUDNN_DATA_HALF && compute == CUDNN_DATA_HALF);
}

// Calls fn(x_offset_index, w_flat, y_index) for every (y element, filter tap) pair inside x.
// fn(xi, wi, yi): xi the x multi-index, wi the element's offset in the filter as stored (KCRS or
// KRSC), yi the y multi-index.
template <class F>
void for_each_tap(const Conv& g, F&& fn) {
  const size_t nd = g.x.size();
  const int K = g.w[0], Cg = g.w[1], Kg = K / g.groups;
  std::vector<int> yi, ri, xi(nd);
  std::vector<int> rdims(g.w.begin() + 2, g.w.end());
  const int64_t taps = count(rdims), ny = count(g.y);
  for (int64_t e = 0; e < ny; ++e) {
    unravel(e, g.y, yi);
    const int k = yi[1], grp = k / Kg;
    for (int c = 0; c < Cg; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        unravel(t, rdims, ri);
        bool inside = true;
        xi[0] = yi[0];
        xi[1] = grp * Cg + c;
        for (size_t d = 2; d < nd && inside; ++d) {
          xi[d] = yi[d] * g.stride[d - 2] - g.pad[d - 2] + ri[d - 2] * g.dil[d - 2];
          inside = xi[d] >= 0 && xi[d] < g.x[d];
        }
        if (!inside) continue;
        const int64_t wi = g.nhwc_filter ? (static_cast<int64_t>(k) * taps + t) * Cg + c
                                         : (static_cast<int64_t>(k) * Cg + c) * taps + t;
        fn(xi, wi, yi);
      }
  }
}

// The forward convolution's sums, fp32 in a fixed order, in y's row-major order.
std::vector<float> forward_sums(const Conv& g, const cudnnTensorStruct& xt, const void* x, const void* w) {
  std::vector<float> acc(static_cast<size_t>(count(g.y)), 0.0f);
  for_each_tap(g, [&](const std::vector<int>& xi, int64_t wi, const std::vector<int>& yi) {
    int64_t flat = 0;
    for (size_t d = 0; d < yi.size(); ++d) flat = flat * g.y[d] + yi[d];
    acc[static_cast<size_t>(flat)] += ld(x, xt.type, offset(xt, xi)) * ld(w, xt.type, wi);
  });
  return acc;
}

template <class Perf>
cudnnStatus_t ranked_algorithms(Direction dir, const Conv& g, cudnnDataType_t data, const cudnnConvolutionStruct& c,
                                int requested, int* returned, Perf* perf) {
  if (requested < 1 || !returned || !perf) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<RankedAlgo> r = ranking(dir, is_half(data));
  const int n = std::min<int>(requested, static_cast<int>(r.size()));
  for (int i = 0; i < n; ++i) {
    perf[i] = Perf{};
    perf[i].algo = static_cast<decltype(perf[i].algo)>(r[static_cast<size_t>(i)].algo);
    const int math = ranked_math(dir, r[static_cast<size_t>(i)].algo, data, c, g.nhwc_filter);
    perf[i].status = math < 0 ? CUDNN_STATUS_NOT_SUPPORTED_SHAPE : CUDNN_STATUS_SUCCESS;
    perf[i].time = 1.0f + static_cast<float>(i);
    perf[i].memory = 0;  // an estimate the workspace query may raise
    perf[i].determinism = CUDNN_DETERMINISTIC;
    perf[i].mathType = static_cast<cudnnMathType_t>(math < 0 ? CUDNN_DEFAULT_MATH : math);
  }
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}

// What cudnnFind*AlgorithmEx answers: every algorithm the heuristic ranks, each "run" once with
// the math type it is ranked with (algo_call_check: refusals and AMP_STANDIN_CUDNN_FAIL's run and
// exec failures become the result's status), timed as AMP_STANDIN_CUDNN_TIMES says
// (DIRECTION:ALGO=MILLISECONDS, or DIRECTION.TYPE:ALGO=MILLISECONDS for data of one type, TYPE
// float, half or bfloat16; comma-separated) or else at its rank (1 ms, 2 ms, ...); the
// successes fastest first, then the failures. Computes nothing: the outputs are scratch.
template <class Perf>
cudnnStatus_t measured_algorithms(Direction dir, const Conv& g, cudnnDataType_t data, const cudnnConvolutionStruct& c,
                                  void* workspace, size_t workspace_bytes, int requested, int* returned, Perf* perf) {
  if (requested < 1 || !returned || !perf) return CUDNN_STATUS_BAD_PARAM;
  const std::vector<RankedAlgo> r = ranking(dir, is_half(data));
  std::vector<Perf> all;
  for (size_t i = 0; i < r.size(); ++i) {
    Perf p{};
    p.algo = static_cast<decltype(p.algo)>(r[i].algo);
    const int math = ranked_math(dir, r[i].algo, data, c, g.nhwc_filter);
    cudnnConvolutionStruct with_math = c;
    with_math.math = math < 0 ? CUDNN_DEFAULT_MATH : static_cast<cudnnMathType_t>(math);
    p.mathType = with_math.math;
    p.status = algo_call_check(dir, g, r[i].algo, data, with_math, workspace, workspace_bytes);
    if (p.status == CUDNN_STATUS_SUCCESS) algo_workspace(dir, g, r[i].algo, data, with_math, &p.memory);
    p.time = static_cast<float>(told("AMP_STANDIN_CUDNN_TIMES", dir, r[i].algo, data).value_or(1.0 + static_cast<double>(i)));
    p.determinism = CUDNN_DETERMINISTIC;
    all.push_back(p);
    if (both_maths() && is_half(data) && with_math.math == CUDNN_DEFAULT_MATH && math >= 0) {
      with_math.math = CUDNN_TENSOR_OP_MATH;
      p.mathType = CUDNN_TENSOR_OP_MATH;
      p.status = algo_call_check(dir, g, r[i].algo, data, with_math, workspace, workspace_bytes);
      p.time = static_cast<float>(
          told("AMP_STANDIN_CUDNN_TIMES", dir, r[i].algo, data, "@1").value_or(1.5 + static_cast<double>(i)));
      all.push_back(p);
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Perf& a, const Perf& b) {
    if ((a.status == CUDNN_STATUS_SUCCESS) != (b.status == CUDNN_STATUS_SUCCESS)) return a.status == CUDNN_STATUS_SUCCESS;
    return a.status == CUDNN_STATUS_SUCCESS && a.time < b.time;
  });
  *returned = std::min<int>(requested, static_cast<int>(all.size()));
  std::copy(all.begin(), all.begin() + *returned, perf);
  return CUDNN_STATUS_SUCCESS;
}

struct Pool {
  std::vector<int> x, y;
};

// Calls fn(y_index, x_indices_in_window (inside x), window_size_with_padding) for every y element.
template <class F>
void for_each_window(const cudnnPoolingStruct& p, const cudnnTensorStruct& xt, const cudnnTensorStruct& yt, F&& fn) {
  const size_t nd = xt.dims.size();
  std::vector<int> yi, wi, xi(nd);
  std::vector<int> wdims(p.window.begin(), p.window.end());
  const int64_t taps = count(wdims), ny = count(yt.dims);
  std::vector<std::vector<int>> inside;
  for (int64_t e = 0; e < ny; ++e) {
    unravel(e, yt.dims, yi);
    inside.clear();
    for (int64_t t = 0; t < taps; ++t) {
      unravel(t, wdims, wi);
      bool ok = true;
      xi[0] = yi[0];
      xi[1] = yi[1];
      for (size_t d = 2; d < nd && ok; ++d) {
        xi[d] = yi[d] * p.stride[d - 2] - p.pad[d - 2] + wi[d - 2];
        ok = xi[d] >= 0 && xi[d] < xt.dims[d];
      }
      if (ok) inside.push_back(xi);
    }
    fn(yi, inside, taps);
  }
}

cudnnStatus_t pool_check(const cudnnPoolingStruct& p, const cudnnTensorStruct& x, const cudnnTensorStruct& y) {
  const size_t nd = x.dims.size();
  if (y.dims.size() != nd || p.window.size() != nd - 2 || x.dims[0] != y.dims[0] || x.dims[1] != y.dims[1])
    return CUDNN_STATUS_BAD_PARAM;
  if (!supported(x.type) || x.type != y.type) return CUDNN_STATUS_NOT_SUPPORTED;
  for (size_t d = 2; d < nd; ++d)
    if ((x.dims[d] + 2 * p.pad[d - 2] - p.window[d - 2]) / p.stride[d - 2] + 1 != y.dims[d]) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// Per-channel statistics of x ([N, C, spatial...]): sums over N and the spatial dimensions.
struct Channels {
  int C = 0;
  int64_t m = 0;  // values per channel
};

Channels channels(const cudnnTensorStruct& x) { return {x.dims[1], count(x.dims) / x.dims[1]}; }

// Iterates over the elements of channel c: fn(offset in x's layout, offset in y's layout).
template <class F>
void for_channel(const cudnnTensorStruct& x, int c, F&& fn) {
  std::vector<int> sub = x.dims, idx;
  sub[1] = 1;
  const int64_t n = count(sub);
  for (int64_t e = 0; e < n; ++e) {
    unravel(e, sub, idx);
    idx[1] = c;
    fn(idx);
  }
}

}  // namespace

cudaStream_t amp_standin::cudnn_stream(cudnnContext* handle) { return handle->stream; }

extern "C" {

cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  if (!h) return CUDNN_STATUS_BAD_PARAM;
  *h = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  if (!h) return CUDNN_STATUS_BAD_PARAM;
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t* s) {
  if (!h || !s) return CUDNN_STATUS_BAD_PARAM;
  *s = h->stream;
  return CUDNN_STATUS_SUCCESS;
}

// The headers' version: the stand-in answers as the library it was written from.
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char* cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED (host stand-in: not implemented)";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH: return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS (stand-in: other)";
  }
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
  *tensorDesc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc,
                           cudnnDataType_t dataType,
                           int nbDims,
                           const int dimA[],
                           const int strideA[]) {
  if (nbDims < 3) return CUDNN_STATUS_BAD_PARAM;
  tensorDesc->type = dataType;
  tensorDesc->dims.assign(dimA, dimA + nbDims);
  tensorDesc->strides.assign(strideA, strideA + nbDims);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
  *filterDesc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc,
                           cudnnDataType_t dataType, 
                           cudnnTensorFormat_t format,
                           int nbDims,
                           const int filterDimA[]) {
  filterDesc->type = dataType;
  filterDesc->format = format;
  filterDesc->dims.assign(filterDimA, filterDimA + nbDims);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
  *convDesc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc,
                                int arrayLength, 
                                const int padA[],
                                const int filterStrideA[],
                                const int dilationA[],
                                cudnnConvolutionMode_t mode,
                                cudnnDataType_t computeType) {
  convDesc->pad.assign(padA, padA + arrayLength);
  convDesc->stride.assign(filterStrideA, filterStrideA + arrayLength);
  convDesc->dilation.assign(dilationA, dilationA + arrayLength);
  convDesc->mode = mode;
  convDesc->compute = computeType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *activationDesc) {
  if (!activationDesc) return CUDNN_STATUS_BAD_PARAM;
  *activationDesc = new cudnnActivationStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc,
                             cudnnActivationMode_t mode,
                             cudnnNanPropagation_t reluNanOpt,
                             double coef) {
  if (!activationDesc) return CUDNN_STATUS_BAD_PARAM;
  *activationDesc = cudnnActivationStruct{mode, reluNanOpt, coef};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc) {
  delete activationDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *poolingDesc) {
  *poolingDesc = new cudnnPoolingStruct;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t poolingDesc) {
  delete poolingDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t poolingDesc,
                            const cudnnPoolingMode_t mode,
                            const cudnnNanPropagation_t maxpoolingNanOpt,
                            int nbDims,
                            const int windowDimA[],
                            const int paddingA[],
                            const int strideA[]) {
  poolingDesc->mode = mode;
  poolingDesc->nan = maxpoolingNanOpt;
  poolingDesc->window.assign(windowDimA, windowDimA + nbDims);
  poolingDesc->pad.assign(paddingA, paddingA + nbDims);
  poolingDesc->stride.assign(strideA, strideA + nbDims);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle,
                                       const cudnnTensorDescriptor_t srcDesc,
                                       const cudnnFilterDescriptor_t filterDesc,
                                       const cudnnConvolutionDescriptor_t convDesc,
                                       const cudnnTensorDescriptor_t destDesc,
                                       const int requestedAlgoCount,
                                       int *returnedAlgoCount,
                                       cudnnConvolutionFwdAlgoPerf_t *perfResults) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*srcDesc, *filterDesc, *convDesc, *destDesc, &g)) return s;
  return ranked_algorithms(kForward, g, srcDesc->type, *convDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle,
                                        const cudnnTensorDescriptor_t xDesc,
                                        const cudnnFilterDescriptor_t wDesc,
                                        const cudnnConvolutionDescriptor_t convDesc,
                                        const cudnnTensorDescriptor_t yDesc,
                                        cudnnConvolutionFwdAlgo_t algo,
                                        size_t *sizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *wDesc, *convDesc, *yDesc, &g)) return s;
  return algo_workspace(kForward, g, algo, xDesc->type, *convDesc, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                            const cudnnFilterDescriptor_t filterDesc,
                                            const cudnnTensorDescriptor_t diffDesc,
                                            const cudnnConvolutionDescriptor_t convDesc,
                                            const cudnnTensorDescriptor_t gradDesc,
                                            const int requestedAlgoCount,
                                            int *returnedAlgoCount,
                                            cudnnConvolutionBwdDataAlgoPerf_t *perfResults) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*gradDesc, *filterDesc, *convDesc, *diffDesc, &g)) return s;
  return ranked_algorithms(kBackwardData, g, gradDesc->type, *convDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle,
                                             const cudnnFilterDescriptor_t wDesc,
                                             const cudnnTensorDescriptor_t dyDesc,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             const cudnnTensorDescriptor_t dxDesc,
                                             cudnnConvolutionBwdDataAlgo_t algo,
                                             size_t *sizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*dxDesc, *wDesc, *convDesc, *dyDesc, &g)) return s;
  return algo_workspace(kBackwardData, g, algo, dxDesc->type, *convDesc, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle,
                                              const cudnnTensorDescriptor_t srcDesc,
                                              const cudnnTensorDescriptor_t diffDesc,
                                              const cudnnConvolutionDescriptor_t convDesc,
                                              const cudnnFilterDescriptor_t gradDesc,
                                              const int requestedAlgoCount,
                                              int *returnedAlgoCount,
                                              cudnnConvolutionBwdFilterAlgoPerf_t *perfResults) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*srcDesc, *gradDesc, *convDesc, *diffDesc, &g)) return s;
  return ranked_algorithms(kBackwardFilter, g, srcDesc->type, *convDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle,
                                               const cudnnTensorDescriptor_t xDesc,
                                               const cudnnTensorDescriptor_t dyDesc,
                                               const cudnnConvolutionDescriptor_t convDesc,
                                               const cudnnFilterDescriptor_t gradDesc,
                                               cudnnConvolutionBwdFilterAlgo_t algo,
                                               size_t *sizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *gradDesc, *convDesc, *dyDesc, &g)) return s;
  return algo_workspace(kBackwardFilter, g, algo, xDesc->type, *convDesc, sizeInBytes);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t handle,
                                       const cudnnTensorDescriptor_t xDesc,
                                       const void *x,
                                       const cudnnFilterDescriptor_t wDesc,
                                       const void *w,
                                       const cudnnConvolutionDescriptor_t convDesc,
                                       const cudnnTensorDescriptor_t yDesc,
                                       void *y,
                                       const int requestedAlgoCount,
                                       int *returnedAlgoCount,
                                       cudnnConvolutionFwdAlgoPerf_t *perfResults,
                                       void *workSpace,
                                       size_t workSpaceSizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *wDesc, *convDesc, *yDesc, &g)) return s;
  if (!on_device(x, *xDesc) || !on_device(y, *yDesc) || !w) return CUDNN_STATUS_BAD_PARAM;
  return measured_algorithms(kForward, g, xDesc->type, *convDesc, workSpace, workSpaceSizeInBytes, requestedAlgoCount,
                             returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t handle,
                                            const cudnnFilterDescriptor_t wDesc,
                                            const void *w,
                                            const cudnnTensorDescriptor_t dyDesc,
                                            const void *dy,
                                            const cudnnConvolutionDescriptor_t convDesc,
                                            const cudnnTensorDescriptor_t dxDesc,
                                            void *dx,
                                            const int requestedAlgoCount,
                                            int *returnedAlgoCount,
                                            cudnnConvolutionBwdDataAlgoPerf_t *perfResults,
                                            void *workSpace,
                                            size_t workSpaceSizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*dxDesc, *wDesc, *convDesc, *dyDesc, &g)) return s;
  if (!on_device(dx, *dxDesc) || !on_device(dy, *dyDesc) || !w) return CUDNN_STATUS_BAD_PARAM;
  return measured_algorithms(kBackwardData, g, dxDesc->type, *convDesc, workSpace, workSpaceSizeInBytes,
                             requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t handle,
                                              const cudnnTensorDescriptor_t xDesc,
                                              const void *x,
                                              const cudnnTensorDescriptor_t dyDesc,
                                              const void *y,
                                              const cudnnConvolutionDescriptor_t convDesc,
                                              const cudnnFilterDescriptor_t dwDesc,
                                              void *dw,
                                              const int requestedAlgoCount,
                                              int *returnedAlgoCount,
                                              cudnnConvolutionBwdFilterAlgoPerf_t *perfResults,
                                              void *workSpace,
                                              size_t workSpaceSizeInBytes) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *dwDesc, *convDesc, *dyDesc, &g)) return s;
  if (!on_device(x, *xDesc) || !on_device(y, *dyDesc) || !dw) return CUDNN_STATUS_BAD_PARAM;
  return measured_algorithms(kBackwardFilter, g, xDesc->type, *convDesc, workSpace, workSpaceSizeInBytes,
                             requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle,
                        const void *alpha,
                        const cudnnTensorDescriptor_t xDesc,
                        const void *x,
                        const cudnnFilterDescriptor_t wDesc,
                        const void *w,
                        const cudnnConvolutionDescriptor_t convDesc,
                        cudnnConvolutionFwdAlgo_t algo,
                        void *workSpace,
                        size_t workSpaceSizeInBytes,
                        const void *beta,
                        const cudnnTensorDescriptor_t yDesc,
                        void *y) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *wDesc, *convDesc, *yDesc, &g)) return s;
  if (!on_device(x, *xDesc) || !on_device(y, *yDesc) || !w) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = algo_call_check(kForward, g, algo, xDesc->type, *convDesc, workSpace, workSpaceSizeInBytes))
    return s;
  const float a = f(alpha), b = f(beta);
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc;
  return run(handle, [=] {
    const std::vector<float> acc = forward_sums(g, xt, x, w);
    std::vector<int> yi;
    for (int64_t e = 0; e < count(g.y); ++e) {
      unravel(e, g.y, yi);
      blend(y, yt.type, offset(yt, yi), a, b, acc[static_cast<size_t>(e)]);
    }
  });
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(cudnnHandle_t handle,
                                      const void *alpha1,
                                      const cudnnTensorDescriptor_t xDesc,
                                      const void *x,
                                      const cudnnFilterDescriptor_t wDesc,
                                      const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo,
                                      void *workSpace,
                                      size_t workSpaceSizeInBytes,
                                      const void *alpha2,
                                      const cudnnTensorDescriptor_t zDesc,
                                      const void *z,
                                      const cudnnTensorDescriptor_t biasDesc,
                                      const void *bias,
                                      const cudnnActivationDescriptor_t activationDesc,
                                      const cudnnTensorDescriptor_t yDesc,
                                      void *y) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *wDesc, *convDesc, *yDesc, &g)) return s;
  // Tests set this to see a caller cope with a refusal that only a real cuDNN's run would give.
  if (const char* refuse = std::getenv("AMP_STANDIN_CUDNN_REFUSE_FUSED"))
    return std::string(refuse) == "1" ? CUDNN_STATUS_NOT_SUPPORTED : static_cast<cudnnStatus_t>(std::atoi(refuse));
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc, zt = *zDesc, bt = *biasDesc;
  const cudnnActivationStruct act = *activationDesc;
  if (!fused_configuration(xt.type, convDesc->compute)) return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
  if (act.mode != CUDNN_ACTIVATION_RELU && act.mode != CUDNN_ACTIVATION_IDENTITY) return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
  if (act.nan != CUDNN_NOT_PROPAGATE_NAN) return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
  if (act.mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
    return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
  if (bt.type != yt.type || bt.dims.size() != yt.dims.size() || bt.dims[0] != 1 || bt.dims[1] != g.w[0] ||
      bt.strides[1] != 1 || count(bt.dims) != bt.dims[1])
    return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  if (zt.type != yt.type || zt.dims != yt.dims || zt.strides != yt.strides) return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
  if (cudnnStatus_t s = algo_call_check(kForward, g, algo, xt.type, *convDesc, workSpace, workSpaceSizeInBytes)) return s;
  const float a1 = f(alpha1), a2 = f(alpha2);
  if (!on_device(x, xt) || !on_device(y, yt) || !on_device(bias, bt) || !w || (a2 != 0.0f && !on_device(z, zt)))
    return CUDNN_STATUS_BAD_PARAM;
  return run(handle, [=] {
    const std::vector<float> acc = forward_sums(g, xt, x, w);
    std::vector<int> yi;
    for (int64_t e = 0; e < count(g.y); ++e) {
      unravel(e, g.y, yi);
      float v = a1 * acc[static_cast<size_t>(e)];
      if (a2 != 0.0f) v += a2 * ld(z, zt.type, offset(zt, yi));
      v += ld(bias, bt.type, static_cast<int64_t>(yi[1]) * bt.strides[1]);
      if (act.mode == CUDNN_ACTIVATION_RELU) v = v > 0.0f ? v : 0.0f;  // NaN -> 0: not propagated
      st(y, yt.type, offset(yt, yi), v);
    }
  });
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle,
                             const void *alpha,
                             const cudnnFilterDescriptor_t wDesc,
                             const void *w,
                             const cudnnTensorDescriptor_t dyDesc,
                             const void *dy,
                             const cudnnConvolutionDescriptor_t convDesc,
                             cudnnConvolutionBwdDataAlgo_t algo,
                             void *workSpace,
                             size_t workSpaceSizeInBytes,
                             const void *beta,
                             const cudnnTensorDescriptor_t dxDesc,
                             void *dx) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*dxDesc, *wDesc, *convDesc, *dyDesc, &g)) return s;
  if (!on_device(dy, *dyDesc) || !on_device(dx, *dxDesc) || !w) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = algo_call_check(kBackwardData, g, algo, dxDesc->type, *convDesc, workSpace, workSpaceSizeInBytes))
    return s;
  const float a = f(alpha), b = f(beta);
  const cudnnTensorStruct xt = *dxDesc, yt = *dyDesc;
  return run(handle, [=] {
    std::vector<float> acc(static_cast<size_t>(count(g.x)), 0.0f);
    for_each_tap(g, [&](const std::vector<int>& xi, int64_t wi, const std::vector<int>& yi) {
      int64_t flat = 0;
      for (size_t d = 0; d < xi.size(); ++d) flat = flat * g.x[d] + xi[d];
      acc[static_cast<size_t>(flat)] += ld(dy, yt.type, offset(yt, yi)) * ld(w, yt.type, wi);
    });
    std::vector<int> xi;
    for (int64_t e = 0; e < count(g.x); ++e) {
      unravel(e, g.x, xi);
      blend(dx, xt.type, offset(xt, xi), a, b, acc[static_cast<size_t>(e)]);
    }
  });
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle,
                               const void *alpha,
                               const cudnnTensorDescriptor_t xDesc,
                               const void *x,
                               const cudnnTensorDescriptor_t dyDesc,
                               const void *dy,
                               const cudnnConvolutionDescriptor_t convDesc,
                               cudnnConvolutionBwdFilterAlgo_t algo,
                               void *workSpace,
                               size_t workSpaceSizeInBytes,
                               const void *beta,
                               const cudnnFilterDescriptor_t dwDesc,
                               void *dw) {
  Conv g;
  if (cudnnStatus_t s = conv_geometry(*xDesc, *dwDesc, *convDesc, *dyDesc, &g)) return s;
  if (!on_device(x, *xDesc) || !on_device(dy, *dyDesc) || !dw) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = algo_call_check(kBackwardFilter, g, algo, xDesc->type, *convDesc, workSpace, workSpaceSizeInBytes))
    return s;
  const float a = f(alpha), b = f(beta);
  const cudnnTensorStruct xt = *xDesc, yt = *dyDesc;
  const cudnnDataType_t wt = dwDesc->type;
  return run(handle, [=] {
    std::vector<float> acc(static_cast<size_t>(count(g.w)), 0.0f);
    for_each_tap(g, [&](const std::vector<int>& xi, int64_t wi, const std::vector<int>& yi) {
      acc[static_cast<size_t>(wi)] += ld(dy, yt.type, offset(yt, yi)) * ld(x, xt.type, offset(xt, xi));
    });
    for (int64_t e = 0; e < count(g.w); ++e) blend(dw, wt, e, a, b, acc[static_cast<size_t>(e)]);
  });
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle,
               const void *alpha,
               const cudnnTensorDescriptor_t aDesc,
               const void *A,
               const void *beta,
               const cudnnTensorDescriptor_t cDesc,
               void *C) {
  const cudnnTensorStruct at = *aDesc, ct = *cDesc;
  if (at.dims.size() != ct.dims.size()) return CUDNN_STATUS_BAD_PARAM;
  for (size_t d = 0; d < at.dims.size(); ++d)
    if (at.dims[d] != ct.dims[d] && at.dims[d] != 1) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(A, at) || !on_device(C, ct)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    std::vector<int> ci, ai;
    for (int64_t e = 0; e < count(ct.dims); ++e) {
      unravel(e, ct.dims, ci);
      ai = ci;
      for (size_t d = 0; d < ai.size(); ++d)
        if (at.dims[d] == 1) ai[d] = 0;
      blend(C, ct.type, offset(ct, ci), a, b, ld(A, at.type, offset(at, ai)));
    }
  });
}

// ReLU only (the one mode callers use), NaN -> 0 unless CUDNN_PROPAGATE_NAN; x and y may be one
// buffer, as documented.
cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle,
                       cudnnActivationDescriptor_t activationDesc,
                       const void *alpha,
                       const cudnnTensorDescriptor_t xDesc,
                       const void *x,
                       const void *beta,
                       const cudnnTensorDescriptor_t yDesc,
                       void *y) {
  const cudnnActivationStruct act = *activationDesc;
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc;
  if (act.mode != CUDNN_ACTIVATION_RELU) return CUDNN_STATUS_NOT_SUPPORTED;
  if (xt.dims != yt.dims || xt.type != yt.type) return CUDNN_STATUS_BAD_PARAM;
  if (!on_device(x, xt) || !on_device(y, yt)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    std::vector<int> i;
    for (int64_t e = 0; e < count(yt.dims); ++e) {
      unravel(e, yt.dims, i);
      const float v = ld(x, xt.type, offset(xt, i));
      const float r = v > 0.0f ? v : (v != v && act.nan == CUDNN_PROPAGATE_NAN ? v : 0.0f);
      blend(y, yt.type, offset(yt, i), a, b, r);
    }
  });
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle,
                    const cudnnPoolingDescriptor_t poolingDesc,
                    const void *alpha,
                    const cudnnTensorDescriptor_t xDesc,
                    const void *x,
                    const void *beta,
                    const cudnnTensorDescriptor_t yDesc,
                    void *y) {
  const cudnnPoolingStruct p = *poolingDesc;
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc;
  if (cudnnStatus_t s = pool_check(p, xt, yt)) return s;
  if (!on_device(x, xt) || !on_device(y, yt)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    for_each_window(p, xt, yt, [&](const std::vector<int>& yi, const std::vector<std::vector<int>>& in, int64_t taps) {
      float v;
      if (p.mode == CUDNN_POOLING_MAX || p.mode == CUDNN_POOLING_MAX_DETERMINISTIC) {
        v = -INFINITY;
        for (const auto& xi : in) {
          const float e = ld(x, xt.type, offset(xt, xi));
          if (e != e && p.nan == CUDNN_PROPAGATE_NAN) {
            v = e;
            break;
          }
          if (e > v) v = e;
        }
      } else {
        float s = 0.0f;
        for (const auto& xi : in) s += ld(x, xt.type, offset(xt, xi));
        const int64_t n = p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? taps : static_cast<int64_t>(in.size());
        v = s / static_cast<float>(n);
      }
      blend(y, yt.type, offset(yt, yi), a, b, v);
    });
  });
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle,
                     const cudnnPoolingDescriptor_t poolingDesc,
                     const void *alpha,
                     const cudnnTensorDescriptor_t yDesc,
                     const void *y,
                     const cudnnTensorDescriptor_t dyDesc,
                     const void *dy,
                     const cudnnTensorDescriptor_t xDesc,
                     const void *x,
                     const void *beta,
                     const cudnnTensorDescriptor_t dxDesc,
                     void *dx) {
  const cudnnPoolingStruct p = *poolingDesc;
  const cudnnTensorStruct xt = *xDesc, yt = *dyDesc, dxt = *dxDesc;
  if (cudnnStatus_t s = pool_check(p, xt, yt)) return s;
  if (!on_device(dy, yt) || !on_device(dx, dxt) || !on_device(x, xt)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    std::vector<float> acc(static_cast<size_t>(count(xt.dims)), 0.0f);
    auto flat = [&](const std::vector<int>& xi) {
      int64_t o = 0;
      for (size_t d = 0; d < xi.size(); ++d) o = o * xt.dims[d] + xi[d];
      return static_cast<size_t>(o);
    };
    for_each_window(p, xt, yt, [&](const std::vector<int>& yi, const std::vector<std::vector<int>>& in, int64_t taps) {
      const float g = ld(dy, yt.type, offset(yt, yi));
      if (in.empty()) return;
      if (p.mode == CUDNN_POOLING_MAX || p.mode == CUDNN_POOLING_MAX_DETERMINISTIC) {
        size_t best = 0;
        float v = ld(x, xt.type, offset(xt, in[0]));
        for (size_t i = 1; i < in.size(); ++i) {
          const float e = ld(x, xt.type, offset(xt, in[i]));
          if (e > v) {
            v = e;
            best = i;
          }
        }
        acc[flat(in[best])] += g;
      } else {
        const int64_t n = p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? taps : static_cast<int64_t>(in.size());
        for (const auto& xi : in) acc[flat(xi)] += g / static_cast<float>(n);
      }
    });
    std::vector<int> xi;
    for (int64_t e = 0; e < count(xt.dims); ++e) {
      unravel(e, xt.dims, xi);
      blend(dx, dxt.type, offset(dxt, xi), a, b, acc[static_cast<size_t>(e)]);
    }
  });
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t handle,
                                        cudnnBatchNormMode_t mode,
                                        const void *alpha, 
                                        const void *beta,  
                                        const cudnnTensorDescriptor_t xDesc,
                                        const void *x, 
                                        const cudnnTensorDescriptor_t yDesc,
                                        void *y, 
                                        const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                        const void *bnScale,
                                        const void *bnBias,
                                        const void *estimatedMean,
                                        const void *estimatedVariance,
                                        double epsilon) {
  if (mode != CUDNN_BATCHNORM_SPATIAL) return CUDNN_STATUS_NOT_SUPPORTED;
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc, pt = *bnScaleBiasMeanVarDesc;
  if (pt.type != CUDNN_DATA_FLOAT || count(pt.dims) != xt.dims[1]) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!on_device(x, xt) || !on_device(y, yt)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    for (int c = 0; c < xt.dims[1]; ++c) {
      const float* sc = static_cast<const float*>(bnScale);
      const float* bi = static_cast<const float*>(bnBias);
      const float* mu = static_cast<const float*>(estimatedMean);
      const float* va = static_cast<const float*>(estimatedVariance);
      const float inv = 1.0f / std::sqrt(va[c] + static_cast<float>(epsilon));
      for_channel(xt, c, [&](const std::vector<int>& idx) {
        const float v = sc[c] * (ld(x, xt.type, offset(xt, idx)) - mu[c]) * inv + bi[c];
        blend(y, yt.type, offset(yt, idx), a, b, v);
      });
    }
  });
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle,
    cudnnBatchNormMode_t mode,

    const void *alpha, 
    const void *beta,  

    const cudnnTensorDescriptor_t xDesc,
    const void *x, 
    const cudnnTensorDescriptor_t yDesc,
    void *y, 

    
    const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,

    
    const void *bnScale,
    const void *bnBias,

    
    double exponentialAverageFactor,

    
    void *resultRunningMean,
    
    void *resultRunningVariance,

    
    double epsilon,

    
    void *resultSaveMean,
    void *resultSaveInvVariance) {
  if (mode != CUDNN_BATCHNORM_SPATIAL) return CUDNN_STATUS_NOT_SUPPORTED;
  const cudnnTensorStruct xt = *xDesc, yt = *yDesc, pt = *bnScaleBiasMeanVarDesc;
  if (pt.type != CUDNN_DATA_FLOAT || count(pt.dims) != xt.dims[1]) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!on_device(x, xt) || !on_device(y, yt)) return CUDNN_STATUS_BAD_PARAM;
  const float a = f(alpha), b = f(beta);
  return run(handle, [=] {
    const Channels ch = channels(xt);
    for (int c = 0; c < ch.C; ++c) {
      double s = 0.0;
      for_channel(xt, c, [&](const std::vector<int>& idx) { s += ld(x, xt.type, offset(xt, idx)); });
      const double mean = s / static_cast<double>(ch.m);
      double q = 0.0;
      for_channel(xt, c, [&](const std::vector<int>& idx) {
        const double d = ld(x, xt.type, offset(xt, idx)) - mean;
        q += d * d;
      });
      const double var = q / static_cast<double>(ch.m);
      const float inv = static_cast<float>(1.0 / std::sqrt(var + epsilon));
      const float* sc = static_cast<const float*>(bnScale);
      const float* bi = static_cast<const float*>(bnBias);
      for_channel(xt, c, [&](const std::vector<int>& idx) {
        const float v = sc[c] * (ld(x, xt.type, offset(xt, idx)) - static_cast<float>(mean)) * inv + bi[c];
        blend(y, yt.type, offset(yt, idx), a, b, v);
      });
      if (resultRunningMean && resultRunningVariance) {
        float* rm = static_cast<float*>(resultRunningMean);
        float* rv = static_cast<float*>(resultRunningVariance);
        const double unbiased = ch.m > 1 ? q / static_cast<double>(ch.m - 1) : 0.0;
        rm[c] = static_cast<float>((1.0 - exponentialAverageFactor) * rm[c] + exponentialAverageFactor * mean);
        rv[c] = static_cast<float>((1.0 - exponentialAverageFactor) * rv[c] + exponentialAverageFactor * unbiased);
      }
      if (resultSaveMean) static_cast<float*>(resultSaveMean)[c] = static_cast<float>(mean);
      if (resultSaveInvVariance) static_cast<float*>(resultSaveInvVariance)[c] = inv;
    }
  });
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t handle,
                                cudnnBatchNormMode_t mode,
                                const void *alphaDataDiff,
                                const void *betaDataDiff,
                                const void *alphaParamDiff,
                                const void *betaParamDiff,
                                const cudnnTensorDescriptor_t xDesc, 
                                const void *x,
                                const cudnnTensorDescriptor_t dyDesc,
                                const void *dy,
                                const cudnnTensorDescriptor_t dxDesc,
                                void *dx,
                                
                                const cudnnTensorDescriptor_t dBnScaleBiasDesc,
                                const void *bnScale, 
                                
                                void *dBnScaleResult,
                                void *dBnBiasResult,
                                
                                double epsilon,

                                
                                const void *savedMean,
                                const void *savedInvVariance) {
  if (mode != CUDNN_BATCHNORM_SPATIAL) return CUDNN_STATUS_NOT_SUPPORTED;
  const cudnnTensorStruct xt = *xDesc, dyt = *dyDesc, dxt = *dxDesc, pt = *dBnScaleBiasDesc;
  if (pt.type != CUDNN_DATA_FLOAT || count(pt.dims) != xt.dims[1]) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!on_device(x, xt) || !on_device(dy, dyt) || !on_device(dx, dxt)) return CUDNN_STATUS_BAD_PARAM;
  const float ad = f(alphaDataDiff), bd = f(betaDataDiff), ap = f(alphaParamDiff), bp = f(betaParamDiff);
  return run(handle, [=] {
    const Channels ch = channels(xt);
    const float* sc = static_cast<const float*>(bnScale);
    for (int c = 0; c < ch.C; ++c) {
      double mean, inv;
      if (savedMean && savedInvVariance) {
        mean = static_cast<const float*>(savedMean)[c];
        inv = static_cast<const float*>(savedInvVariance)[c];
      } else {
        double s = 0.0, q = 0.0;
        for_channel(xt, c, [&](const std::vector<int>& idx) { s += ld(x, xt.type, offset(xt, idx)); });
        mean = s / static_cast<double>(ch.m);
        for_channel(xt, c, [&](const std::vector<int>& idx) {
          const double d = ld(x, xt.type, offset(xt, idx)) - mean;
          q += d * d;
        });
        inv = 1.0 / std::sqrt(q / static_cast<double>(ch.m) + epsilon);
      }
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for_channel(xt, c, [&](const std::vector<int>& idx) {
        const double g = ld(dy, dyt.type, offset(dyt, idx));
        sum_dy += g;
        sum_dy_xhat += g * (ld(x, xt.type, offset(xt, idx)) - mean) * inv;
      });
      const double m = static_cast<double>(ch.m);
      for_channel(xt, c, [&](const std::vector<int>& idx) {
        const double g = ld(dy, dyt.type, offset(dyt, idx));
        const double xhat = (ld(x, xt.type, offset(xt, idx)) - mean) * inv;
        const double v = sc[c] * inv * (g - sum_dy / m - xhat * sum_dy_xhat / m);
        blend(dx, dxt.type, offset(dxt, idx), ad, bd, static_cast<float>(v));
      });
      blend(dBnScaleResult, CUDNN_DATA_FLOAT, c, ap, bp, static_cast<float>(sum_dy_xhat));
      blend(dBnBiasResult, CUDNN_DATA_FLOAT, c, ap, bp, static_cast<float>(sum_dy));
    }
  });
}

}  // extern "C"
