// Convolutions and pooling through cuDNN's legacy API (forward, with its bias, residual and ReLU
// fused where cuDNN allows; backward data and backward filter; pooling forward and backward),
// algorithms from cuDNN's heuristics, put in the order of cuDNN's measured times once per shape and
// device (order_by_measured_time). The _v7 heuristics rank algorithms that cuDNN may then refuse
// when run: each call falls back along the ranking, each algorithm with the math type it was
// ranked with, and the device remembers per shape the one that ran.
// 16-bit convolutions accumulate in fp32 on Tensor Cores; fp32 ones use TF32 only when
// allowed (--tf32, CompileOptions::tf32), as the products do. cuDNN pads symmetrically: asymmetric ONNX pads (odd SAME
// padding) are refused with the node named rather than computed wrongly.
// Channels-last (CudaOp::channels_last): 16-bit 2-D convolutions and pools also compute with
// their activations stored NHWC and the filter KRSC (cuDNN's CUDNN_TENSOR_NHWC filter format),
// the layout cuDNN's Tensor Core kernels read natively; per-channel vectors stay as they are.
// A pointwise one (1x1, no padding, one group; at a stride, of the rows it picks) stored so is a
// matrix product, and runs as cuBLASLt's (pointwise_product), forward and both gradients.
#include "backends/cuda/convolution_ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>

#include "backends/cuda/channels_last_operands.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/gemm_tuning.h"
#include "backends/cuda/stream_timer.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/depthwise_conv.cuh"
#include "backends/cuda/max_pool_grad.cuh"
#include "backends/cuda/node_patterns.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/strided_copy.cuh"
#include "backends/cuda/widen.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/conv_transpose.h"

namespace amp::cuda {
namespace {

// The most workspace one convolution's algorithm may ask for: 256 MiB, or AMP_CUDNN_WORKSPACE_MIB.
// On an H100 (2026-11-27) cuDNN ranked first, for 34 of ResNet-50's bf16 convolutions at batch
// 128, algorithms that asked 294 MiB; what a larger cap buys in time against the arena's memory is
// for a device run to measure (the plan shares one workspace among all units: the cap bounds it).
size_t max_conv_workspace() {
  static const size_t bytes = [] {
    const char* v = std::getenv("AMP_CUDNN_WORKSPACE_MIB");
    if (!v || !*v) return size_t{256} << 20;
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(v, &end, 10);
    if (*end != '\0' || mib == 0 || mib > (size_t{1} << 20))
      throw InputError(std::string("AMP_CUDNN_WORKSPACE_MIB must be a positive number of MiB, got '") + v + "'");
    return static_cast<size_t>(mib) << 20;
  }();
  return bytes;
}
// The workspace a convolution reserves beyond its chosen algorithm's for the ones it may fall back
// on: cuBLASLt's products reserve as much (Gemm::kMaxWorkspace), so the plan's shared scratch rarely
// grows for it. Reserving every ranked algorithm's need instead (up to max_conv_workspace() each) made
// the plan's scratch the largest need of any algorithm ranked for any convolution, run or not.
constexpr size_t kFallbackWorkspace = size_t{32} << 20;

// Window attributes of Conv and the pools, resolved against the actual dims. cuDNN needs at least
// two spatial dims, so 1-D windows get a second of size 1.
struct Window {
  std::vector<int> kernel, pads, strides, dilations;
};

// The attributes as written on the node (empty when absent), read at compile time.
struct WindowAttrs {
  explicit WindowAttrs(const Node& n)
      : auto_pad(n.attr_string("auto_pad", "NOTSET")),
        kernel_shape(n.attr_ints("kernel_shape")),
        strides(n.attr_ints("strides")),
        dilations(n.attr_ints("dilations")),
        pads(n.attr_ints("pads")),
        group(n.attr_int("group", 1)) {}
  std::string auto_pad;
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
  int64_t group;
};

Window resolve_window(const WindowAttrs& a, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                      const std::vector<int64_t>& kernel) {
  const size_t spatial = in.size() - 2;
  const std::string& auto_pad = a.auto_pad;
  const std::vector<int64_t> strides = a.strides.empty() ? std::vector<int64_t>(spatial, 1) : a.strides;
  const std::vector<int64_t> dilations = a.dilations.empty() ? std::vector<int64_t>(spatial, 1) : a.dilations;
  const std::vector<int64_t> pads = a.pads.empty() ? std::vector<int64_t>(2 * spatial, 0) : a.pads;
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial || kernel.size() != spatial)
    throw InputError("window attributes do not match the " + std::to_string(spatial) + " spatial dims");
  Window w;
  for (size_t d = 0; d < spatial; ++d) {
    int64_t begin = pads[d], end = pads[d + spatial];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (out[d + 2] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in[d + 2]);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    }
    if (begin != end)
      throw InputError("padding " + std::to_string(begin) + " before and " + std::to_string(end) +
                       " after: cuDNN pads both sides alike");
    w.kernel.push_back(static_cast<int>(kernel[d]));
    w.pads.push_back(static_cast<int>(begin));
    w.strides.push_back(static_cast<int>(strides[d]));
    w.dilations.push_back(static_cast<int>(dilations[d]));
  }
  while (w.kernel.size() < 2) {
    w.kernel.push_back(1);
    w.pads.push_back(0);
    w.strides.push_back(1);
    w.dilations.push_back(1);
  }
  return w;
}

std::vector<int64_t> at_least_4d(std::vector<int64_t> d) {
  while (d.size() < 4) d.push_back(1);
  return d;
}

// Everything one convolution's three directions share.
struct ConvSetup {
  std::shared_ptr<CudnnTensor> x, y, bias;
  std::shared_ptr<CudnnFilter> w;
  std::shared_ptr<CudnnConvolution> conv;
  // "float16 x[8,3,32,32] w[16,3,3,3] pads [1,1] strides [1,1] dilations [1,1] group 1", with
  // " nhwc" after the dtype when the operands are channels-last: the key the device remembers
  // algorithms by, and cuDNN runs different kernels (and ranks them differently) for the layouts.
  std::string shape;
  bool fma_only = false;  // fp32 data without TF32: every algorithm runs with CUDNN_FMA_MATH
};

std::string list(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
  return out.str() + "]";
}
std::string list(const std::vector<int>& v) { return list(std::vector<int64_t>(v.begin(), v.end())); }

// Each operand described in the layout its desc says (TensorDesc::channels_last: the op's
// channels_last() lists x, w and y together, so they agree).
ConvSetup conv_setup(const WindowAttrs& a, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y, bool tf32) {
  if (x.dims.size() < 3) throw InputError("Conv needs [N, C, spatial...] input");
  if (x.channels_last != w.channels_last || x.channels_last != y.channels_last)
    throw InputError("the convolution's operands are not all channels-last or all not");
  const std::vector<int64_t> kernel(w.dims.begin() + 2, w.dims.end());
  const Window win = resolve_window(a, x.dims, y.dims, kernel);
  ConvSetup s;
  s.x = std::make_shared<CudnnTensor>(x.dtype, at_least_4d(x.dims), x.channels_last);
  s.y = std::make_shared<CudnnTensor>(y.dtype, at_least_4d(y.dims), y.channels_last);
  s.w = std::make_shared<CudnnFilter>(w.dtype, at_least_4d(w.dims), w.channels_last);
  // [1, C, 1, ...] of Y's rank: cudnnAddTensor and cudnnConvolutionBackwardBias want the bias
  // descriptor to have as many dims as Y's (5 for a 3-D convolution).
  std::vector<int64_t> bias_dims(std::max<size_t>(4, y.dims.size()), 1);
  bias_dims[1] = y.dims[1];
  s.bias = std::make_shared<CudnnTensor>(y.dtype, bias_dims);
  s.conv = std::make_shared<CudnnConvolution>(win.pads, win.strides, win.dilations,
                                              static_cast<int>(a.group), x.dtype, tf32);
  s.shape = std::string(dtype_name(x.dtype)) + (x.channels_last ? " nhwc" : "") + " x" + list(x.dims) + " w" +
            list(w.dims) + " pads " + list(win.pads) +
            " strides " + list(win.strides) + " dilations " + list(win.dilations) + " group " + std::to_string(a.group) +
            (x.dtype == DType::kFloat && tf32 ? " tf32" : "");
  s.fma_only = x.dtype == DType::kFloat && !tf32;
  return s;
}

const char* algorithm_name(cudnnConvolutionFwdAlgo_t a) {
  static const char* kNames[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM",     "DIRECT",
                                 "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT ? kNames[a] : "?";
}
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t a) {
  static const char* kNames[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT ? kNames[a] : "?";
}
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t a) {
  static const char* kNames[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return a >= 0 && a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT ? kNames[a] : "?";
}
const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
  }
  return "?";
}

// An algorithm the heuristic ranked that may run: with the math type it was ranked with (cuDNN
// picks kernels by algorithm and math type together) and the workspace it needs.
template <class Algo>
struct RankedAlgorithm {
  Algo algo;
  cudnnMathType_t math;
  size_t memory;
};

// What the device remembers of a choice (DeviceContext::remember_algorithm): the algorithm and the
// math type it was measured or ran with, as algorithm + 16 * math type (cuDNN's algorithm enums are
// below 16, its math types below 4). The algorithm alone is not a choice: on an H100 (cuDNN 9.19)
// the bf16 backward-data ALGO_1 of ResNet-50's 1x1 convolutions took 0.3 ms with TENSOR_OP_MATH and
// 10 ms with DEFAULT_MATH, and recalling the algorithm alone ran whichever the heuristic ranked first.
template <class Algo>
int remembered_choice(const RankedAlgorithm<Algo>& a) {
  return static_cast<int>(a.algo) + 16 * static_cast<int>(a.math);
}
template <class Algo>
bool is_choice(const RankedAlgorithm<Algo>& a, int choice) {
  return remembered_choice(a) == choice;
}

// The algorithms one direction of one convolution may run, in the heuristic's order (the one that
// ran for this shape before, if any, first), and the one that runs now: a call cuDNN refuses moves
// it on for every later run (run_ranked).
template <class Algo>
struct Ranked {
  std::vector<RankedAlgorithm<Algo>> algos;
  std::string what, shape;  // "forward convolution", ConvSetup::shape: the key the device remembers it by
  std::string key() const { return what + " " + shape; }
  std::shared_ptr<std::atomic<size_t>> current = std::make_shared<std::atomic<size_t>>(0);
  // The largest need of any ranked algorithm: the scratch a measurement of them all takes.
  size_t largest_workspace() const {
    size_t bytes = 0;
    for (const RankedAlgorithm<Algo>& a : algos) bytes = std::max(bytes, a.memory);
    return bytes;
  }
  // The workspace the plan reserves: the first algorithm's need, and the others' up to
  // kFallbackWorkspace or the first's, whichever is more. run_ranked never falls back on an
  // algorithm that needs more than this.
  size_t workspace() const {
    const size_t budget = std::max(algos.empty() ? size_t{0} : algos[0].memory, kFallbackWorkspace);
    size_t bytes = 0;
    for (const RankedAlgorithm<Algo>& a : algos)
      if (a.memory <= budget) bytes = std::max(bytes, a.memory);
    return bytes;
  }
};

// Every result of a _v7 heuristic that may run: its status is success, cuDNN answers the workspace
// query for it (with its math type set: the workspace depends on both) and the workspace is at
// most max_conv_workspace(). Its workspace is the larger of the heuristic's estimate and the query's
// answer: an algorithm handed less than it needs fails with CUDNN_STATUS_BAD_PARAM at run time.
// fp32 data without TF32 keeps CUDNN_FMA_MATH whatever the heuristic says, so no fallback can
// bring TF32 in.
// `asked`: when the heuristic was asked, for the report's "rank ms" (the heuristic and the
// workspace queries: cuDNN 9 answers them through its engine API, which may build a plan).
template <class Algo, class Perf, class WorkspaceOf>
Ranked<Algo> ranked_algorithms(const std::vector<Perf>& perfs, int found, const char* what, const ConvSetup& setup,
                               DeviceContext& ctx, std::chrono::steady_clock::time_point asked,
                               WorkspaceOf&& workspace_of) {
  Ranked<Algo> r;
  r.what = what;
  r.shape = setup.shape;
  std::string skipped;
  auto skip = [&](Algo a, const std::string& why) { skipped += (skipped.empty() ? "" : "; ") + std::string(algorithm_name(a)) + " " + why; };
  for (int i = 0; i < found; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) {
      skip(p.algo, std::string("ranked ") + cudnnGetErrorString(p.status));
      continue;
    }
    const cudnnMathType_t math = setup.fma_only ? CUDNN_FMA_MATH : p.mathType;
    AMP_CUDNN_CHECK(cudnnSetConvolutionMathType(setup.conv->get(), math));
    size_t bytes = 0;
    if (const cudnnStatus_t status = workspace_of(p.algo, &bytes); status != CUDNN_STATUS_SUCCESS) {
      skip(p.algo, std::string("workspace query ") + cudnnGetErrorString(status));
      continue;
    }
    const size_t memory = std::max(p.memory, bytes);
    if (memory > max_conv_workspace()) {
      skip(p.algo, "needs " + std::to_string(memory >> 20) + " MiB of workspace");
      continue;
    }
    r.algos.push_back({p.algo, math, memory});
  }
  if (r.algos.empty())
    throw InputError(std::string("cuDNN has no ") + what + " algorithm for these shapes and types (" + skipped + ")");
  if (const std::optional<int> ran = ctx.remembered_algorithm(r.key())) {
    auto it = std::find_if(r.algos.begin(), r.algos.end(), [&](const RankedAlgorithm<Algo>& a) { return is_choice(a, *ran); });
    if (it != r.algos.end()) {
      std::rotate(r.algos.begin(), it, it + 1);
    } else {
      // cuDNN's Find may time an algorithm with a math type the heuristic did not rank it with: the
      // remembered pair goes first when the heuristic still ranks the algorithm runnable and its
      // workspace with that math type fits.
      const auto algo = static_cast<Algo>(*ran % 16);
      const auto math = static_cast<cudnnMathType_t>(*ran / 16);
      auto alike = std::find_if(r.algos.begin(), r.algos.end(), [&](const RankedAlgorithm<Algo>& a) { return a.algo == algo; });
      size_t bytes = 0;
      if (alike != r.algos.end() && !setup.fma_only &&
          cudnnSetConvolutionMathType(setup.conv->get(), math) == CUDNN_STATUS_SUCCESS &&
          workspace_of(algo, &bytes) == CUDNN_STATUS_SUCCESS && std::max(alike->memory, bytes) <= max_conv_workspace())
        r.algos.insert(r.algos.begin(), RankedAlgorithm<Algo>{algo, math, std::max(alike->memory, bytes)});
    }
  }
  std::string ranked;
  for (const RankedAlgorithm<Algo>& a : r.algos)
    ranked += (ranked.empty() ? "" : ", ") + std::string(algorithm_name(a.algo)) + " (" + math_name(a.math) + ", " +
              std::to_string(a.memory) + " B)";
  char rank_ms[32];
  std::snprintf(rank_ms, sizeof rank_ms, "%.1f",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count());
  ctx.report().record("convolution_algorithms", {{"direction", what},
                                                 {"shape", setup.shape},
                                                 {"chosen", algorithm_name(r.algos[0].algo)},
                                                 {"chosen math", math_name(r.algos[0].math)},
                                                 {"runnable", ranked},
                                                 {"skipped", skipped},
                                                 {"rank ms", rank_ms}});
  return r;
}

// How convolutions rank their algorithms (order_by_measured_time), AMP_CUDNN_FIND: by cuDNN's
// Find, which times every algorithm it has (the default); `top`: by timing the heuristic's first
// kTimedAlgorithms runnable ones here (time_ranked), a fraction of Find's cost (on the H100 Find
// took 3.7 s of ResNet-50's 6.8 s first bf16 step with cold caches, 50 shapes); 0: the heuristic's
// order, the same on every run.
enum class Measure { kNone, kTop, kAll };
Measure measure_mode() {
  const char* v = std::getenv("AMP_CUDNN_FIND");
  if (v && std::string(v) == "0") return Measure::kNone;
  if (v && std::string(v) == "top") return Measure::kTop;
  return Measure::kAll;
}
bool measure_algorithms() { return measure_mode() != Measure::kNone; }

constexpr size_t kTimedAlgorithms = 4;

// What cuDNN's Find answers, for the first kTimedAlgorithms of r's algorithms alone: each run by
// run(a) (with its math type set) once to load its kernels and once between two events, fastest
// first; a refused one keeps its status and follows. Fills perfs (room for n) and found.
template <class Algo, class Perf, class Run>
cudnnStatus_t time_ranked(const Ranked<Algo>& r, const ConvSetup& setup, DeviceContext& ctx, Perf* perfs, int n,
                          int* found, Run&& run) {
  StreamTimer timer(ctx.stream());
  std::vector<Perf> timed;
  for (size_t i = 0; i < r.algos.size() && timed.size() < kTimedAlgorithms && static_cast<int>(timed.size()) < n; ++i) {
    const RankedAlgorithm<Algo>& a = r.algos[i];
    Perf p{};
    p.algo = a.algo;
    p.mathType = a.math;
    p.memory = a.memory;
    p.time = -1.0f;
    AMP_CUDNN_CHECK(cudnnSetConvolutionMathType(setup.conv->get(), a.math));
    p.status = run(a);
    if (p.status == CUDNN_STATUS_SUCCESS) p.time = timer.time([&] { p.status = run(a); });
    if (p.status != CUDNN_STATUS_SUCCESS) cudaGetLastError();
    timed.push_back(p);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const Perf& a, const Perf& b) {
    const bool ok_a = a.status == CUDNN_STATUS_SUCCESS, ok_b = b.status == CUDNN_STATUS_SUCCESS;
    return ok_a != ok_b ? ok_a : ok_a && a.time < b.time;
  });
  std::copy(timed.begin(), timed.end(), perfs);
  *found = static_cast<int>(timed.size());
  return CUDNN_STATUS_SUCCESS;
}

// Puts r's algorithms in the order of the times cuDNN measures running each of them once on
// scratch buffers of the convolution's sizes (cudnnFind*AlgorithmEx, what PyTorch's
// cudnn.benchmark does), each with the math type it was timed with; the ones it could not time
// follow in the heuristic's order, for run_ranked to fall back on. The _v7 heuristic alone ranked
// ALGO_1 first for the 16-bit backward-filter convolutions of models/cnn on an H200 (cuDNN 9.19):
// 1.9 ms of a 2.7 ms training step, 23 times the fp32 step's ALGO_0 per call. Measured once per shape and
// device: the fastest is remembered (DeviceContext::remember_algorithm) and later plans of the
// shape start with it unmeasured. find(x, w, y, workspace, workspace bytes, perfs, count, &found)
// calls the direction's Find with the three operands in the convolution's own roles. Returns the
// fastest time in milliseconds when it measured.
template <class Algo, class Perf, class Find>
std::optional<float> order_by_measured_time(Ranked<Algo>& r, const ConvSetup& setup, size_t x_bytes, size_t w_bytes,
                                            size_t y_bytes, DeviceContext& ctx, Find&& find) {
  // Measured before (by this process or an earlier one: algorithm_store.h) and still runnable.
  const std::optional<int> ran = ctx.remembered_algorithm(r.key());
  if (!measure_algorithms() || (ran && is_choice(r.algos.front(), *ran))) return std::nullopt;
  const auto started = std::chrono::steady_clock::now();  // what measuring costs a plan, in the report
  const DeviceBuffer x(x_bytes), w(w_bytes), y(y_bytes), workspace(r.largest_workspace());
  for (const DeviceBuffer* b : {&x, &w, &y}) AMP_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->size(), ctx.stream()));
  AMP_CUDNN_CHECK(cudnnSetConvolutionMathType(setup.conv->get(), setup.fma_only ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  std::vector<Perf> perfs(2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT);  // every algorithm, with up to two math types each
  int found = 0;
  const cudnnStatus_t status = find(x.data(), w.data(), y.data(), workspace.data(), workspace.size(), perfs.data(),
                                    static_cast<int>(perfs.size()), &found);
  AMP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  const std::string took =
      std::to_string(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  if (status != CUDNN_STATUS_SUCCESS) {  // the heuristic's order stands
    cudaGetLastError();
    ctx.report().record("convolution_measurement_failed",
                        {{"direction", r.what}, {"shape", r.shape}, {"status", cudnnGetErrorString(status)},
                         {"find ms", took}});
    return std::nullopt;
  }
  std::vector<RankedAlgorithm<Algo>> ordered;
  std::vector<bool> taken(r.algos.size(), false);
  std::string measured;
  float fastest = 0.0f;
  for (int i = 0; i < found; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    for (size_t k = 0; k < r.algos.size(); ++k)
      if (!taken[k] && r.algos[k].algo == p.algo) {
        taken[k] = true;
        const cudnnMathType_t math = setup.fma_only ? CUDNN_FMA_MATH : p.mathType;
        if (ordered.empty()) fastest = p.time;
        ordered.push_back({p.algo, math, std::max(r.algos[k].memory, p.memory)});
        measured += (measured.empty() ? "" : ", ") + std::string(algorithm_name(p.algo)) + " (" + math_name(math) + ") " +
                    std::to_string(p.time) + " ms";
        break;
      }
  }
  if (ordered.empty()) return std::nullopt;
  for (size_t k = 0; k < r.algos.size(); ++k)
    if (!taken[k]) ordered.push_back(r.algos[k]);
  r.algos = std::move(ordered);
  ctx.remember_algorithm(r.key(), remembered_choice(r.algos[0]));
  ctx.report().record("convolution_algorithms_measured", {{"direction", r.what},
                                                          {"shape", r.shape},
                                                          {"chosen", algorithm_name(r.algos[0].algo)},
                                                          {"measured", measured},
                                                          {"find ms", took}});
  return fastest;
}

// One direction's Find for order_by_measured_time, find(x, w, y, workspace, workspace bytes,
// perfs, count, &found): with AMP_CUDNN_FIND=top, time_ranked over r running
// run(algorithm, x, w, y, workspace, workspace bytes), the direction's convolution; else cuDNN's
// own Find, cudnn_find with the same arguments.
template <class Algo, class Perf, class Run, class CudnnFind>
auto measured_find(const ConvSetup& setup, DeviceContext& ctx, const Ranked<Algo>& r, Run run, CudnnFind cudnn_find) {
  return [&setup, &ctx, &r, run, cudnn_find](void* x, void* w, void* y, void* ws, size_t ws_bytes, Perf* perfs, int n,
                                             int* found) {
    if (measure_mode() == Measure::kTop)
      return time_ranked(r, setup, ctx, perfs, n, found,
                         [&](const RankedAlgorithm<Algo>& a) { return run(a.algo, x, w, y, ws, ws_bytes); });
    return cudnn_find(x, w, y, ws, ws_bytes, perfs, n, found);
  };
}

// The three directions' Find, the operands in the convolution's own roles.
auto find_forward(const ConvSetup& setup, DeviceContext& ctx, const Ranked<cudnnConvolutionFwdAlgo_t>& r) {
  return measured_find<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
      setup, ctx, r,
      [&setup, &ctx](cudnnConvolutionFwdAlgo_t a, void* x, void* w, void* y, void* ws, size_t ws_bytes) {
        const float one = 1.0f, zero = 0.0f;
        return cudnnConvolutionForward(ctx.cudnn(), &one, setup.x->get(), x, setup.w->get(), w, setup.conv->get(), a, ws,
                                       ws_bytes, &zero, setup.y->get(), y);
      },
      [&setup, &ctx](void* x, void* w, void* y, void* ws, size_t ws_bytes, cudnnConvolutionFwdAlgoPerf_t* perfs, int n,
                     int* found) {
        return cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn(), setup.x->get(), x, setup.w->get(), w,
                                                      setup.conv->get(), setup.y->get(), y, n, found, perfs, ws, ws_bytes);
      });
}
auto find_backward_data(const ConvSetup& setup, DeviceContext& ctx, const Ranked<cudnnConvolutionBwdDataAlgo_t>& r) {
  return measured_find<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
      setup, ctx, r,
      [&setup, &ctx](cudnnConvolutionBwdDataAlgo_t a, void* x, void* w, void* y, void* ws, size_t ws_bytes) {
        const float one = 1.0f, zero = 0.0f;
        return cudnnConvolutionBackwardData(ctx.cudnn(), &one, setup.w->get(), w, setup.y->get(), y, setup.conv->get(), a,
                                            ws, ws_bytes, &zero, setup.x->get(), x);
      },
      [&setup, &ctx](void* x, void* w, void* y, void* ws, size_t ws_bytes, cudnnConvolutionBwdDataAlgoPerf_t* perfs, int n,
                     int* found) {
        return cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.cudnn(), setup.w->get(), w, setup.y->get(), y,
                                                           setup.conv->get(), setup.x->get(), x, n, found, perfs, ws,
                                                           ws_bytes);
      });
}
auto find_backward_filter(const ConvSetup& setup, DeviceContext& ctx, const Ranked<cudnnConvolutionBwdFilterAlgo_t>& r) {
  return measured_find<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
      setup, ctx, r,
      [&setup, &ctx](cudnnConvolutionBwdFilterAlgo_t a, void* x, void* w, void* y, void* ws, size_t ws_bytes) {
        const float one = 1.0f, zero = 0.0f;
        return cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, setup.x->get(), x, setup.y->get(), y, setup.conv->get(), a,
                                              ws, ws_bytes, &zero, setup.w->get(), w);
      },
      [&setup, &ctx](void* x, void* w, void* y, void* ws, size_t ws_bytes, cudnnConvolutionBwdFilterAlgoPerf_t* perfs,
                     int n, int* found) {
        return cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.cudnn(), setup.x->get(), x, setup.y->get(), y,
                                                             setup.conv->get(), setup.w->get(), w, n, found, perfs, ws,
                                                             ws_bytes);
      });
}

// Runs call(algorithm) with the current algorithm, its math type set on the descriptor first. A
// status of cuDNN's BAD_PARAM category is this code's error and throws; any other failure hands
// the call to the next ranked algorithm that fits the reserved workspace (Ranked::workspace), for
// this and every later run, and the device remembers it for the shape; when none is left, the
// failure throws.
template <class Algo, class Call>
void run_ranked(const Ranked<Algo>& r, cudnnConvolutionDescriptor_t conv, DeviceContext& c, Call&& call) {
  for (size_t i = r.current->load();;) {
    const RankedAlgorithm<Algo>& a = r.algos[i];
    AMP_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, a.math));
    const cudnnStatus_t status = call(a);
    if (status == CUDNN_STATUS_SUCCESS) return;
    // Refused: the next algorithm that fits the reserved workspace, if any.
    const size_t reserved = r.workspace();
    size_t j = i + 1;
    while (j < r.algos.size() && r.algos[j].memory > reserved) ++j;
    if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_BAD_PARAM || j == r.algos.size()) {
      std::string call_name = "the " + r.what + " with " + algorithm_name(a.algo) + " (" + std::to_string(i + 1) +
                              " of " + std::to_string(r.algos.size()) + " ranked algorithms";
      if (j == r.algos.size() && i + 1 < r.algos.size())
        call_name += "; the rest need more than its " + std::to_string(reserved) + "-byte workspace";
      call_name += ")";
      check_cudnn(status, call_name.c_str(), __FILE__, __LINE__);
    }
    cudaGetLastError();  // a failed launch leaves its error for the next call to report
    const RankedAlgorithm<Algo>& next = r.algos[j];
    c.report().record("convolution_algorithm_refused", {{"direction", r.what},
                                                        {"shape", r.shape},
                                                        {"algorithm", algorithm_name(a.algo)},
                                                        {"status", cudnnGetErrorString(status)},
                                                        {"next", algorithm_name(next.algo)}});
    r.current->store(j);
    c.remember_algorithm(r.key(), remembered_choice(next));
    i = j;
  }
}


// A pointwise convolution — a 1x1 kernel, unit dilations, no padding, one group — over
// channels-last 16-bit data is a matrix product: X stored as [N*H*W, C] rows, W as [K, C] (KRSC
// and KCRS are the same bytes for a 1x1 kernel), Y and dY as [N*Ho*Wo, K]; at a stride, of the
// rows of X the stride picks (gathered into scratch; dX scattered back among zeros). cuBLASLt
// then runs it: on an H200 (cuDNN 9.19, 2026-11-28) cuDNN's legacy algorithms ran ResNet-50's
// bf16 1x1 convolutions at 26-130 TFLOP/s (backward data and filter, batch 128: 15 ms of its
// 56 ms step, measured by cuDNN's Find), where cuBLASLt ran GPT-2-small's products at about 700.
// AMP_CUDA_POINTWISE_GEMM=0 keeps them on cuDNN, for comparison.
struct Pointwise {
  int64_t stride_h = 1, stride_w = 1;
  bool strided() const { return stride_h != 1 || stride_w != 1; }
};

std::optional<Pointwise> pointwise_product(const WindowAttrs& attrs, const TensorDesc& x, const TensorDesc& w) {
  const char* v = std::getenv("AMP_CUDA_POINTWISE_GEMM");
  if (v && std::string(v) == "0") return std::nullopt;
  if (!channels_last_case(x) || !x.channels_last || w.dims.size() != 4 || w.dims[2] != 1 || w.dims[3] != 1 ||
      attrs.group != 1 || w.dims[1] != x.dims[1])
    return std::nullopt;
  for (int64_t d : attrs.dilations)
    if (d != 1) return std::nullopt;
  for (int64_t d : attrs.pads)
    if (d != 0) return std::nullopt;
  Pointwise p;
  if (!attrs.strides.empty()) {
    if (attrs.strides.size() != 2 || attrs.strides[0] < 1 || attrs.strides[1] < 1) return std::nullopt;
    p.stride_h = attrs.strides[0];
    p.stride_w = attrs.strides[1];
  }
  // A 1x1 kernel at stride 1 pads nothing under any auto_pad; at a stride SAME may pad.
  if (attrs.auto_pad != "NOTSET" && attrs.auto_pad != "VALID" && p.strided()) return std::nullopt;
  return p;
}

// Rows of the product: N*Ho*Wo of a channels-last [N, K, Ho, Wo] (Y or dY).
int64_t pointwise_rows(const TensorDesc& y) { return y.numel() / y.dims[1]; }

// The rows of a channels-last X [N, C, H, W] that a stride picks, as a contiguous [N, Ho, Wo, C]
// (gather), or the other way round into X's places (scatter).
StridedCopy pointwise_rows_copy(const TensorDesc& x, const TensorDesc& y, const Pointwise& p, bool gather) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  StridedCopy copy;
  copy.dims = {n, y.dims[2], y.dims[3], c};
  const std::vector<int64_t> picked = {h * w * c, p.stride_h * w * c, p.stride_w * c, 1};
  const std::vector<int64_t> packed = contiguous_strides(copy.dims);
  copy.src_strides = gather ? picked : packed;
  copy.dst_strides = gather ? packed : picked;
  copy.elem_bytes = dtype_size(x.dtype);
  return simplify(copy);
}

// D [m, n] = op(A) op(B) of 16-bit `type`, accumulated in fp32, D rounded once.
GemmDesc pointwise_desc(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, DType type) {
  GemmDesc g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.ab_type = g.d_type = type;
  return g;
}

std::shared_ptr<GemmPlan> pointwise_plan(const GemmDesc& g, const std::string& shape, const char* direction,
                                         DeviceContext& ctx) {
  auto plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
  tune_gemm(*plan, ctx);
  ctx.report().record("convolution_as_product", {{"direction", direction}, {"shape", shape}, {"product", g.str()}});
  return plan;
}

std::string pointwise_shape(const TensorDesc& x, const TensorDesc& w, const Pointwise& p) {
  return std::string(dtype_name(x.dtype)) + " nhwc x" + list(x.dims) + " w" + list(w.dims) +
         (p.strided() ? " strides [" + std::to_string(p.stride_h) + "," + std::to_string(p.stride_w) + "]" : "");
}

// What follows the convolution in its unit. A Conv with a bias runs
// cudnnConvolutionBiasActivationForward, y = act(conv(x) + z + bias) in one pass, the bias and z
// added in fp32 before Y's one rounding: alone with IDENTITY, or with the residual z and the ReLU
// the matcher absorbed (match_convolution_epilogues).
struct ConvEpilogue {
  bool residual = false;  // operand 3, z: an absorbed Add's other operand, of Y's dims and type
  bool relu = false;
};

// Whether grouped and depthwise convolutions may compute channels-last too
// (AMP_CUDA_CHANNELS_LAST_GROUPED=1). cuDNN's legacy API lists its NHWC-filter algorithms without
// saying they take more than one group; PyTorch runs channels-last depthwise convolutions through
// it. Off until a device shows they run and are faster: on the H100 (2026-11-27) efficientnet_b0's
// bf16 step, whose depthwise convolutions and the BatchNorms after them stay row-major (every
// other unit channels-last, the SiLUs between them converting as they compute), took 429 ms
// against PyTorch's 52 ms.
bool grouped_channels_last() {
  return env_flag("AMP_CUDA_CHANNELS_LAST_GROUPED");
}

// The 2-D geometry our window kernels take (MaxPoolGrad2d, DepthwiseConv2d): X's and Y's dims,
// the filter's and the resolved window's strides and (symmetric) pads.
template <class G>
void fill_window2d(G& g, const TensorDesc& x, const TensorDesc& y, int64_t kernel_h, int64_t kernel_w, const Window& win) {
  g.t = x.dtype;
  g.n = x.dims[0];
  g.c = x.dims[1];
  g.h = x.dims[2];
  g.w = x.dims[3];
  g.out_h = y.dims[2];
  g.out_w = y.dims[3];
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = win.strides[0];
  g.stride_w = win.strides[1];
  g.pad_h = win.pads[0];
  g.pad_w = win.pads[1];
}

// A depthwise convolution our kernels take (depthwise_conv.cuh): row-major [N, C, H, W] X, W
// [C, 1, KH, KW] with group C, unit dilations, X, W and Y of one type; nullopt otherwise, or with
// AMP_CUDA_CUDNN_DEPTHWISE=1 (cuDNN's, for comparison).
std::optional<DepthwiseConv2d> depthwise_of(const WindowAttrs& attrs, const TensorDesc& x, const TensorDesc& w,
                                            const TensorDesc& y) {
  if (env_flag("AMP_CUDA_CUDNN_DEPTHWISE")) return std::nullopt;
  if (x.channels_last || y.channels_last || x.dims.size() != 4 || w.dims.size() != 4 || y.dims.size() != 4 ||
      attrs.group != x.dims[1] || w.dims[0] != x.dims[1] || w.dims[1] != 1 || y.dims[1] != x.dims[1] ||
      w.dtype != x.dtype || y.dtype != x.dtype)
    return std::nullopt;
  for (int64_t d : attrs.dilations)
    if (d != 1) return std::nullopt;
  const Window win = resolve_window(attrs, x.dims, y.dims, {w.dims[2], w.dims[3]});
  DepthwiseConv2d g;
  fill_window2d(g, x, y, w.dims[2], w.dims[3], win);
  for (int d = 0; d < 2; ++d) {
    const int64_t in = d ? g.w : g.h, k = d ? g.kernel_w : g.kernel_h, out = d ? g.out_w : g.out_h;
    if ((in + 2 * win.pads[d] - k) / win.strides[d] + 1 != out) return std::nullopt;  // ceil_mode-like shapes
  }
  if (!depthwise_conv_fits(g)) return std::nullopt;
  return g;
}

// Operands: 0 X, 1 W, 2 B (optional), 3 z (with ConvEpilogue::residual).
class Conv final : public CudaOp {
 public:
  Conv(const Node& n, int64_t) : attrs_(n) {}
  Conv(const Node& n, ConvEpilogue e) : attrs_(n), epilogue_(e) {}

  // x, W (KRSC), z and y channels-last; the bias, a per-channel vector, as it is. Grouped and
  // depthwise convolutions stay NCHW unless grouped_channels_last().
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    if (!s.has_in(0) || !s.has_in(1) || !channels_last_case(*s.in[0]) ||
        s.in[1]->dims.size() != 4 || (attrs_.group != 1 && !grouped_channels_last()))
      return {};
    ChannelsLastOperands l;
    l.in.assign(s.in.size(), false);
    l.out.assign(s.out.size(), false);
    l.in[0] = l.in[1] = true;
    if (epilogue_.residual && s.has_in(3)) l.in[3] = true;
    l.out[0] = true;
    return l;
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (std::unique_ptr<PreparedOp> own = depthwise(s)) return own;
    if (std::unique_ptr<PreparedOp> product = pointwise(s, ctx)) return product;
    const ConvSetup setup = conv_setup(attrs_, *s.in[0], *s.in[1], *s.out[0], s.tf32);
    if (epilogue_.residual && s.in[3]->dims != s.out[0]->dims)
      throw InputError("the residual added to the convolution is not of its output's dims");
    // z is read through Y's descriptor (the fused call wants them alike).
    if (epilogue_.residual && s.in[3]->channels_last != s.out[0]->channels_last)
      throw InputError("the residual added to the convolution is not stored in its output's layout");
    auto workspace_of = [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), setup.x->get(), setup.w->get(), setup.conv->get(),
                                                     setup.y->get(), a, bytes);
    };
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    int found = 0;
    const auto asked = std::chrono::steady_clock::now();
    AMP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), setup.x->get(), setup.w->get(), setup.conv->get(),
                                                           setup.y->get(), static_cast<int>(perfs.size()), &found,
                                                           perfs.data()));
    auto algos = ranked_algorithms<cudnnConvolutionFwdAlgo_t>(perfs, found, "forward convolution", setup, ctx, asked,
                                                              workspace_of);
    order_by_measured_time<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
        algos, setup, s.in[0]->nbytes(), s.in[1]->nbytes(), s.out[0]->nbytes(), ctx, find_forward(setup, ctx, algos));
    const bool has_bias = s.has_in(2), residual = epilogue_.residual, relu = epilogue_.relu;
    auto act = std::make_shared<CudnnActivation>(relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY);
    // A Conv with a bias runs cudnnConvolutionBiasActivationForward, which takes a ReLU with any
    // algorithm but IDENTITY only with IMPLICIT_PRECOMP_GEMM (cudnnActivationMode_t): without a
    // ReLU the unit is one call when that is the algorithm that runs, else the convolution and its
    // additions run apart. Forcing it could trade a pass over Y for a slower convolution (Winograd
    // or FFT for 3x3 filters), a trade no measurement here has settled. cuDNN says which
    // configurations its fused call takes only when it is called (it refuses before launching
    // anything): a run whose fused call is refused runs the unit apart with the same algorithm,
    // and when that runs, so does every later one, captured replays included (warm-up runs come
    // first); when that is refused too, the algorithm was, and the next gets the fused call again.
    enum Fused : int { kUntried, kAccepted, kRefused };
    auto fused = std::make_shared<std::atomic<int>>(has_bias ? kUntried : kRefused);
    return std::make_unique<PreparedFunction>(
        [setup, algos, act, has_bias, residual, relu, fused](const OpBuffers& b, DeviceContext& c) {
          const float one = 1.0f, zero = 0.0f;
          run_ranked(algos, setup.conv->get(), c, [&](const RankedAlgorithm<cudnnConvolutionFwdAlgo_t>& a) {
            auto note = [&](const std::string& result, const std::string& status) {
              c.report().record("fused_convolution", {{"shape", setup.shape}, {"algorithm", algorithm_name(a.algo)},
                                                      {"result", result}, {"status", status}});
            };
            cudnnStatus_t refusal = CUDNN_STATUS_SUCCESS;
            if (fused->load() != kRefused && (relu || a.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)) {
              // Scaling factors are float for float, half and bfloat16 data. Without a residual z is
              // weighted 0 and not read; Y stands in for it.
              const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
                  c.cudnn(), &one, setup.x->get(), b.in[0], setup.w->get(), b.in[1], setup.conv->get(), a.algo,
                  b.workspace, a.memory, residual ? &one : &zero, setup.y->get(), residual ? b.in[3] : b.out[0],
                  setup.bias->get(), b.in[2], act->get(), setup.y->get(), b.out[0]);
              if (!cudnn_refused(status)) {
                if (status == CUDNN_STATUS_SUCCESS && fused->exchange(kAccepted) == kUntried) note("accepted", "");
                return status;
              }
              refusal = status;
            } else if (fused->exchange(kRefused) == kUntried) {
              note("not tried: IDENTITY needs IMPLICIT_PRECOMP_GEMM", "");
            }
            // The convolution and what it absorbed, one call after another.
            const cudnnStatus_t status =
                cudnnConvolutionForward(c.cudnn(), &one, setup.x->get(), b.in[0], setup.w->get(), b.in[1],
                                        setup.conv->get(), a.algo, b.workspace, a.memory, &zero, setup.y->get(), b.out[0]);
            if (status != CUDNN_STATUS_SUCCESS) return status;
            if (refusal != CUDNN_STATUS_SUCCESS && fused->exchange(kRefused) != kRefused)
              note("refused", cudnnGetErrorString(refusal));
            if (has_bias)
              AMP_CUDNN_CHECK(cudnnAddTensor(c.cudnn(), &one, setup.bias->get(), b.in[2], &one, setup.y->get(), b.out[0]));
            if (residual)
              AMP_CUDNN_CHECK(cudnnAddTensor(c.cudnn(), &one, setup.y->get(), b.in[3], &one, setup.y->get(), b.out[0]));
            if (relu)  // in place, which cudnnActivationForward allows; NaN -> 0 as the fused call
              AMP_CUDNN_CHECK(cudnnActivationForward(c.cudnn(), act->get(), &one, setup.y->get(), b.out[0], &zero,
                                                     setup.y->get(), b.out[0]));
            return CUDNN_STATUS_SUCCESS;
          });
        },
        algos.workspace());
  }

 private:
  // A depthwise convolution with at most a bias after it, on depthwise_conv.cuh's kernel; null
  // when it is none (depthwise_of) or something follows it in the unit.
  std::unique_ptr<PreparedOp> depthwise(const OpShapes& s) const {
    const std::optional<DepthwiseConv2d> d = depthwise_of(attrs_, *s.in[0], *s.in[1], *s.out[0]);
    const bool has_bias = s.has_in(2);
    if (!d || epilogue_.residual || epilogue_.relu || (has_bias && s.in[2]->dtype != s.in[0]->dtype)) return nullptr;
    return std::make_unique<PreparedFunction>([g = *d, has_bias](const OpBuffers& b, DeviceContext& c) {
      depthwise_conv_forward(g, b.in[0], b.in[1], has_bias ? b.in[2] : nullptr, b.out[0], c.sm_count(), c.stream());
    });
  }

  // A pointwise convolution with at most a bias after it: Y = X W^T (+ bias), cuBLASLt's
  // (pointwise_product); null when it is none, something follows it in the unit, or cuBLASLt has
  // no algorithm for the product.
  std::unique_ptr<PreparedOp> pointwise(const OpShapes& s, DeviceContext& ctx) const {
    const std::optional<Pointwise> p = pointwise_product(attrs_, *s.in[0], *s.in[1]);
    const bool has_bias = s.has_in(2);
    if (!p || !s.out[0]->channels_last || epilogue_.residual || epilogue_.relu ||
        (has_bias && s.in[2]->dtype != s.in[0]->dtype))
      return nullptr;
    const TensorDesc &x = *s.in[0], &y = *s.out[0];
    GemmDesc g = pointwise_desc(pointwise_rows(y), s.in[1]->dims[0], x.dims[1], false, true, x.dtype);
    g.epilogue = has_bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    std::shared_ptr<GemmPlan> plan;
    try {
      plan = pointwise_plan(g, pointwise_shape(x, *s.in[1], *p), "forward convolution", ctx);
    } catch (const NoGemmAlgorithm&) {
      return nullptr;  // cuDNN's convolution
    }
    // At a stride, the picked rows of X gathered after the product's workspace.
    const std::optional<StridedCopy> gather =
        p->strided() ? std::optional<StridedCopy>(pointwise_rows_copy(x, y, *p, true)) : std::nullopt;
    const size_t rows_at = workspace_aligned(plan->workspace_bytes());
    const size_t rows_bytes = gather ? static_cast<size_t>(g.m * g.k) * dtype_size(x.dtype) : 0;
    return std::make_unique<PreparedFunction>(
        [plan, has_bias, gather, rows_at](const OpBuffers& b, DeviceContext& c) {
          const void* rows = b.in[0];
          if (gather) {
            void* picked = static_cast<char*>(b.workspace) + rows_at;
            strided_copy(*gather, b.in[0], picked, c.sm_count(), c.stream());
            rows = picked;
          }
          plan->enqueue(c.cublaslt(), c.stream(), rows, b.in[1], b.out[0], b.out[0],
                        has_bias ? const_cast<void*>(b.in[2]) : nullptr, nullptr, b.workspace);
        },
        rows_at + rows_bytes);
  }

  WindowAttrs attrs_;
  ConvEpilogue epilogue_;
};

// The backward-filter algorithms the heuristic ranks for setup (ranked_algorithms).
Ranked<cudnnConvolutionBwdFilterAlgo_t> ranked_backward_filter(const ConvSetup& setup, DeviceContext& ctx) {
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  int found = 0;
  const auto asked = std::chrono::steady_clock::now();
  AMP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn(), setup.x->get(), setup.y->get(),
                                                                setup.conv->get(), setup.w->get(),
                                                                static_cast<int>(perfs.size()), &found, perfs.data()));
  return ranked_algorithms<cudnnConvolutionBwdFilterAlgo_t>(
      perfs, found, "backward-filter convolution", setup, ctx, asked, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn(), setup.x->get(), setup.y->get(),
                                                              setup.conv->get(), setup.w->get(), a, bytes);
      });
}

// A 16-bit weight gradient computed in fp32: X and dY widened (exactly) into fp32 copies, cuDNN's
// fp32 backward filter with TF32 allowed (fp16 and bf16 values are TF32 values, so the products are
// exact and accumulate in fp32, as in a 16-bit Tensor Core convolution), dW rounded once to 16 bits.
// On an H200 (cuDNN 9.19, NCHW) the 16-bit backward-filter kernels of models/cnn's shapes took
// 0.6-0.9 ms a call where fp32's took 0.025: a ConvGrad takes this path when cuDNN's measured
// fastest fp32 algorithm plus the measured casts beats its measured fastest 16-bit one, decided
// once per shape and device (remembered under "fp32 " and the 16-bit key). Channels-last operands
// stay so: the widening and narrowing are elementwise, so the fp32 copies keep X's and dY's NHWC
// order and the fp32 convolution, described channels-last as well (conv_setup reads the descs'
// layout), writes dW's KRSC order; the key carries the 16-bit key's " nhwc".
struct WidenedFilter {
  ConvSetup setup;  // fp32 descriptors, TF32 allowed
  Ranked<cudnnConvolutionBwdFilterAlgo_t> ranked;
  // The fp32 copies of X, dY and dW in the op's scratch, after what the convolution itself needs.
  size_t x_offset = 0, dy_offset = 0, dw_offset = 0, bytes = 0;
};

// Milliseconds to widen X and dY and narrow dW once, on scratch buffers (the second of two runs).
float cast_time(const TensorDesc& x, const TensorDesc& dy, const TensorDesc& w, DeviceContext& ctx) {
  const DeviceBuffer x16(x.nbytes()), dy16(dy.nbytes()), w16(w.nbytes());
  const DeviceBuffer x32(static_cast<size_t>(x.numel()) * 4), dy32(static_cast<size_t>(dy.numel()) * 4),
      w32(static_cast<size_t>(w.numel()) * 4);
  for (const DeviceBuffer* b : {&x16, &dy16, &w32}) AMP_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->size(), ctx.stream()));
  StreamTimer timer(ctx.stream());
  float ms = 0.0f;
  for (int run = 0; run < 2; ++run)
    ms = timer.time([&] {
      widen_to_float({{x.dtype, x16.data(), static_cast<float*>(x32.data()), x.numel()},
                      {dy.dtype, dy16.data(), static_cast<float*>(dy32.data()), dy.numel()}},
                     ctx.sm_count(), ctx.stream());
      narrow_from_float(w.dtype, static_cast<const float*>(w32.data()), w16.data(), w.numel(), ctx.sm_count(),
                        ctx.stream());
    });
  return ms;
}

// The widened path for a 16-bit ConvGrad's dW, when measured faster (WidenedFilter); t16: the
// fastest 16-bit time order_by_measured_time measured, if it measured.
std::optional<WidenedFilter> widened_filter(const WindowAttrs& attrs, const OpShapes& s,
                                            const Ranked<cudnnConvolutionBwdFilterAlgo_t>& filter16,
                                            std::optional<float> t16, DeviceContext& ctx) {
  const DType t = s.in[0]->dtype;
  if ((t != DType::kFloat16 && t != DType::kBFloat16) || !measure_algorithms()) return std::nullopt;
  const std::string key = "fp32 " + filter16.key();
  const std::optional<int> decided = ctx.remembered_algorithm(key);
  if (decided ? *decided == 0 : !t16) return std::nullopt;
  TensorDesc x = *s.in[1], w = *s.in[2], dy = *s.in[0];
  for (TensorDesc* d : {&x, &w, &dy}) d->dtype = DType::kFloat;
  const size_t copies = workspace_aligned(x.nbytes()) + workspace_aligned(dy.nbytes()) + workspace_aligned(w.nbytes());
  if (copies > max_conv_workspace()) {
    ctx.remember_algorithm(key, 0);
    ctx.report().record("convolution_widened", {{"shape", filter16.shape}, {"chosen", "16-bit"},
                                                {"why", "the fp32 copies need " + std::to_string(copies >> 20) + " MiB"}});
    return std::nullopt;
  }
  WidenedFilter f;
  f.setup = conv_setup(attrs, x, w, dy, /*tf32=*/true);
  try {
    f.ranked = ranked_backward_filter(f.setup, ctx);
  } catch (const InputError& e) {
    // No fp32 algorithm for these operands (cuDNN's NHWC-filter tables list fewer algorithms than
    // NCHW's): the 16-bit convolution, which has one, computes dW.
    ctx.remember_algorithm(key, 0);
    ctx.report().record("convolution_widened", {{"shape", filter16.shape}, {"chosen", "16-bit"}, {"why", e.what()}});
    return std::nullopt;
  }
  if (!decided) {
    const std::optional<float> t32 = order_by_measured_time<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
        f.ranked, f.setup, x.nbytes(), w.nbytes(), dy.nbytes(), ctx, find_backward_filter(f.setup, ctx, f.ranked));
    const float casts = t32 ? cast_time(*s.in[1], *s.in[0], *s.in[2], ctx) : 0.0f;
    const bool widen = t32 && *t32 + casts < *t16;
    ctx.remember_algorithm(key, widen ? 1 : 0);
    ctx.report().record("convolution_widened", {{"shape", filter16.shape},
                                                {"chosen", widen ? "fp32" : "16-bit"},
                                                {"16-bit ms", std::to_string(*t16)},
                                                {"fp32 ms", t32 ? std::to_string(*t32) : "not measured"},
                                                {"casts ms", std::to_string(casts)}});
    if (!widen) return std::nullopt;
  } else {
    ctx.report().record("convolution_widened", {{"shape", filter16.shape}, {"chosen", "fp32"}, {"why", "remembered"}});
  }
  f.x_offset = workspace_aligned(f.ranked.workspace());
  f.dy_offset = f.x_offset + workspace_aligned(x.nbytes());
  f.dw_offset = f.dy_offset + workspace_aligned(dy.nbytes());
  f.bytes = f.dw_offset + w.nbytes();
  return f;
}

// ai.onnx_amp ConvGrad(dY, X, W) -> dX, dW, dB (each optional)
class ConvGrad final : public CudaOp {
 public:
  ConvGrad(const Node& n, int64_t) : attrs_(n) {}

  // dY, X, W and dX, dW channels-last (W and dW KRSC); dB, per channel, as it is. Grouped
  // convolutions stay NCHW, as Conv's, unless grouped_channels_last().
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    if (!s.has_in(0) || !s.has_in(1) || !s.has_in(2) || !channels_last_case(*s.in[1]) ||
        s.in[2]->dims.size() != 4 || (attrs_.group != 1 && !grouped_channels_last()))
      return {};
    ChannelsLastOperands l;
    l.in.assign(s.in.size(), true);
    l.out.assign(s.out.size(), false);
    for (size_t k = 0; k < 2 && k < s.out.size(); ++k) l.out[k] = s.has_out(k);
    return l;
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (std::unique_ptr<PreparedOp> own = depthwise(s, ctx)) return own;
    if (std::unique_ptr<PreparedOp> product = pointwise(s, ctx)) return product;
    const ConvSetup setup = conv_setup(attrs_, *s.in[1], *s.in[2], *s.in[0], s.tf32);
    const bool want_dx = s.has_out(0), want_dw = s.has_out(1), want_db = s.has_out(2);
    Ranked<cudnnConvolutionBwdDataAlgo_t> data;
    Ranked<cudnnConvolutionBwdFilterAlgo_t> filter;
    if (want_dx) {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
      int found = 0;
      const auto asked = std::chrono::steady_clock::now();
      AMP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), setup.w->get(), setup.y->get(),
                                                                  setup.conv->get(), setup.x->get(),
                                                                  static_cast<int>(perfs.size()), &found, perfs.data()));
      data = ranked_algorithms<cudnnConvolutionBwdDataAlgo_t>(
          perfs, found, "backward-data convolution", setup, ctx, asked, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), setup.w->get(), setup.y->get(),
                                                                setup.conv->get(), setup.x->get(), a, bytes);
          });
      order_by_measured_time<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
          data, setup, s.in[1]->nbytes(), s.in[2]->nbytes(), s.in[0]->nbytes(), ctx, find_backward_data(setup, ctx, data));
    }
    std::optional<WidenedFilter> widened;
    if (want_dw) {
      filter = ranked_backward_filter(setup, ctx);
      const std::optional<float> t16 =
          order_by_measured_time<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
              filter, setup, s.in[1]->nbytes(), s.in[2]->nbytes(), s.in[0]->nbytes(), ctx, find_backward_filter(setup, ctx, filter));
      widened = widened_filter(attrs_, s, filter, t16, ctx);
    }
    const DType dtype = s.in[0]->dtype;
    const int64_t x_count = s.in[1]->numel(), dy_count = s.in[0]->numel(), w_count = s.in[2]->numel();
    // dB sums dY over every axis but the channels. cuDNN 9's cudnnConvolutionBackwardBias answered
    // CUDNN_STATUS_NOT_SUPPORTED on an H200 (cuDNN 9.19) in fp32, fp16 and bf16 alike: a ReducePlan
    // (fp32 accumulation, as ReduceSum) does it instead, after the two convolutions, in their scratch.
    // A channels-last dY is summed as the [N, spatial..., C] it is stored as, over all but the last.
    const std::shared_ptr<ReducePlan> bias_sum = want_db ? bias_sum_of(*s.in[0], ctx) : nullptr;
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          const float one = 1.0f, zero = 0.0f;
          if (want_dx)
            run_ranked(data, setup.conv->get(), c, [&](const RankedAlgorithm<cudnnConvolutionBwdDataAlgo_t>& a) {
              return cudnnConvolutionBackwardData(c.cudnn(), &one, setup.w->get(), b.in[2], setup.y->get(), b.in[0],
                                                  setup.conv->get(), a.algo, b.workspace, a.memory, &zero, setup.x->get(),
                                                  b.out[0]);
            });
          if (want_dw && widened) {
            char* scratch = static_cast<char*>(b.workspace);
            float* x32 = reinterpret_cast<float*>(scratch + widened->x_offset);
            float* dy32 = reinterpret_cast<float*>(scratch + widened->dy_offset);
            float* dw32 = reinterpret_cast<float*>(scratch + widened->dw_offset);
            widen_to_float({{dtype, b.in[1], x32, x_count}, {dtype, b.in[0], dy32, dy_count}}, c.sm_count(), c.stream());
            const ConvSetup& f = widened->setup;
            run_ranked(widened->ranked, f.conv->get(), c, [&](const RankedAlgorithm<cudnnConvolutionBwdFilterAlgo_t>& a) {
              return cudnnConvolutionBackwardFilter(c.cudnn(), &one, f.x->get(), x32, f.y->get(), dy32, f.conv->get(), a.algo,
                                                    b.workspace, a.memory, &zero, f.w->get(), dw32);
            });
            narrow_from_float(dtype, dw32, b.out[1], w_count, c.sm_count(), c.stream());
          } else if (want_dw) {
            run_ranked(filter, setup.conv->get(), c, [&](const RankedAlgorithm<cudnnConvolutionBwdFilterAlgo_t>& a) {
              return cudnnConvolutionBackwardFilter(c.cudnn(), &one, setup.x->get(), b.in[1], setup.y->get(), b.in[0],
                                                    setup.conv->get(), a.algo, b.workspace, a.memory, &zero,
                                                    setup.w->get(), b.out[1]);
            });
          }
          if (want_db) bias_sum->enqueue(b.in[0], b.out[2], b.workspace, c.stream());
        },
        // A widened dW needs its fp32 copies and that convolution's scratch, not the 16-bit one's.
        std::max({data.workspace(), widened ? widened->bytes : filter.workspace(),
                  bias_sum ? bias_sum->workspace_bytes() : size_t{0}}));
  }

 private:
  // dB's sum of dY over every axis but the channels (see prepare).
  static std::shared_ptr<ReducePlan> bias_sum_of(const TensorDesc& dy, DeviceContext& ctx) {
    const std::vector<int64_t> stored = dy.channels_last ? stored_dims(dy) : dy.dims;
    std::vector<bool> reduced(stored.size(), true);
    reduced[dy.channels_last ? stored.size() - 1 : 1] = false;
    return std::make_shared<ReducePlan>(dy.dtype, stored, reduced, ReduceKind::kSum, ctx.sm_count());
  }

  // A depthwise convolution's gradients on depthwise_conv.cuh's kernels, dB as prepare sums it;
  // null when the shapes are not such a convolution's.
  std::unique_ptr<PreparedOp> depthwise(const OpShapes& s, DeviceContext& ctx) const {
    const TensorDesc &dy = *s.in[0], &x = *s.in[1], &w = *s.in[2];
    const bool want_dx = s.has_out(0), want_dw = s.has_out(1), want_db = s.has_out(2);
    if (dy.dtype != x.dtype || (want_dx && s.out[0]->dtype != x.dtype) || (want_dw && s.out[1]->dtype != x.dtype))
      return nullptr;
    const std::optional<DepthwiseConv2d> d = depthwise_of(attrs_, x, w, dy);
    if (!d) return nullptr;
    const std::shared_ptr<ReducePlan> bias_sum = want_db ? bias_sum_of(dy, ctx) : nullptr;
    const int sm = ctx.sm_count();
    return std::make_unique<PreparedFunction>(
        [g = *d, want_dx, want_dw, bias_sum, sm](const OpBuffers& b, DeviceContext& c) {
          if (want_dx) depthwise_conv_backward_data(g, b.in[0], b.in[2], b.out[0], sm, c.stream());
          if (want_dw) depthwise_conv_backward_filter(g, b.in[0], b.in[1], b.out[1], b.workspace, sm, c.stream());
          if (bias_sum) bias_sum->enqueue(b.in[0], b.out[2], b.workspace, c.stream());
        },
        std::max(want_dw ? depthwise_conv_backward_filter_workspace(*d, sm) : size_t{0},
                 bias_sum ? bias_sum->workspace_bytes() : size_t{0}));
  }

  // A pointwise convolution's gradients as cuBLASLt products (pointwise_product): dX = dY W
  // ([N*Ho*Wo, K] x [K, C]) and dW = dY^T X ([K, N*Ho*Wo] x [N*Ho*Wo, C]), each accumulated in
  // fp32 and rounded once to its 16-bit type; at a stride, X's picked rows gathered for dW and dX's
  // computed into scratch and scattered back among zeros; dB as prepare sums it. Null when the
  // shapes are not such a convolution's or cuBLASLt has no algorithm for one of the products.
  std::unique_ptr<PreparedOp> pointwise(const OpShapes& s, DeviceContext& ctx) const {
    const TensorDesc &dy = *s.in[0], &x = *s.in[1], &w = *s.in[2];
    const bool want_dx = s.has_out(0), want_dw = s.has_out(1), want_db = s.has_out(2);
    const std::optional<Pointwise> p = pointwise_product(attrs_, x, w);
    if (!p || !dy.channels_last || dy.dtype != x.dtype || w.dtype != x.dtype || (want_dx && !s.out[0]->channels_last))
      return nullptr;
    const std::string shape = pointwise_shape(x, w, *p);
    const int64_t rows = pointwise_rows(dy);
    std::shared_ptr<GemmPlan> data, filter;
    try {
      if (want_dx)
        data = pointwise_plan(pointwise_desc(rows, x.dims[1], w.dims[0], false, false, x.dtype), shape,
                              "backward-data convolution", ctx);
      if (want_dw)
        filter = pointwise_plan(pointwise_desc(w.dims[0], x.dims[1], rows, true, false, x.dtype), shape,
                                "backward-filter convolution", ctx);
    } catch (const NoGemmAlgorithm&) {
      return nullptr;  // cuDNN's convolutions
    }
    const std::shared_ptr<ReducePlan> bias_sum = want_db ? bias_sum_of(dy, ctx) : nullptr;
    const size_t product_ws = std::max(data ? data->workspace_bytes() : size_t{0}, filter ? filter->workspace_bytes() : size_t{0});
    // At a stride: X's picked rows (for dW) and dX's rows (before the scatter) share one region.
    const std::optional<StridedCopy> gather = p->strided() ? std::optional<StridedCopy>(pointwise_rows_copy(x, dy, *p, true))
                                                           : std::nullopt;
    const std::optional<StridedCopy> scatter =
        p->strided() && want_dx ? std::optional<StridedCopy>(pointwise_rows_copy(x, dy, *p, false)) : std::nullopt;
    const size_t rows_at = workspace_aligned(product_ws);
    const size_t rows_bytes = p->strided() ? static_cast<size_t>(rows * x.dims[1]) * dtype_size(x.dtype) : 0;
    const size_t dx_bytes = want_dx ? s.out[0]->nbytes() : 0;
    return std::make_unique<PreparedFunction>(
        [data, filter, bias_sum, gather, scatter, rows_at, dx_bytes](const OpBuffers& b, DeviceContext& c) {
          void* region = static_cast<char*>(b.workspace) + rows_at;
          if (data) {
            data->enqueue(c.cublaslt(), c.stream(), b.in[0], b.in[2], scatter ? region : b.out[0], scatter ? region : b.out[0],
                          nullptr, nullptr, b.workspace);
            if (scatter) {
              AMP_CUDA_CHECK(cudaMemsetAsync(b.out[0], 0, dx_bytes, c.stream()));
              strided_copy(*scatter, region, b.out[0], c.sm_count(), c.stream());
            }
          }
          if (filter) {
            const void* picked = b.in[1];
            if (gather) {
              strided_copy(*gather, b.in[1], region, c.sm_count(), c.stream());
              picked = region;
            }
            filter->enqueue(c.cublaslt(), c.stream(), b.in[0], picked, b.out[1], b.out[1], nullptr, nullptr, b.workspace);
          }
          if (bias_sum) bias_sum->enqueue(b.in[0], b.out[2], b.workspace, c.stream());
        },
        std::max(rows_at + rows_bytes, bias_sum ? bias_sum->workspace_bytes() : size_t{0}));
  }

  WindowAttrs attrs_;
};

// ConvTranspose(X, W, B) is the backward-data pass of the convolution that reads Y with the same
// window and W [C, M/g, k...] as its filter (C output channels, M/g input channels per group):
// cudnnConvolutionBackwardData(W, dy := X) -> dx := Y, then the bias. That convolution maps Y's
// extents back onto X's (output_padding is below the stride, floored away). cuDNN pads
// symmetrically, so asymmetric pads (odd auto_pad or output_shape totals) are refused with the
// node named.
class ConvTranspose final : public CudaOp {
 public:
  ConvTranspose(const Node& n, int64_t) : attrs_(n) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc &x = *s.in[0], &w = *s.in[1], &y = *s.out[0];
    if (x.dims.size() < 3 || w.dims.size() != x.dims.size())
      throw InputError("ConvTranspose needs [N, C, spatial...] input and a weight of its rank");
    const std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), kernel(w.dims.begin() + 2, w.dims.end());
    const TransposedWindow tw = make_transposed_window(attrs_, in, kernel);
    Window win;
    for (size_t d = 0; d < in.size(); ++d) {
      if (tw.pads_begin[d] != tw.pads_end[d])
        throw InputError("padding " + std::to_string(tw.pads_begin[d]) + " before and " + std::to_string(tw.pads_end[d]) +
                         " after: cuDNN pads both sides alike");
      win.kernel.push_back(static_cast<int>(kernel[d]));
      win.pads.push_back(static_cast<int>(tw.pads_begin[d]));
      win.strides.push_back(static_cast<int>(tw.strides[d]));
      win.dilations.push_back(static_cast<int>(tw.dilations[d]));
    }
    while (win.kernel.size() < 2) {
      win.kernel.push_back(1);
      win.pads.push_back(0);
      win.strides.push_back(1);
      win.dilations.push_back(1);
    }
    // The convolution's view: its input is Y, its output X.
    ConvSetup setup;
    setup.x = std::make_shared<CudnnTensor>(y.dtype, at_least_4d(y.dims));
    setup.y = std::make_shared<CudnnTensor>(x.dtype, at_least_4d(x.dims));
    setup.w = std::make_shared<CudnnFilter>(w.dtype, at_least_4d(w.dims));
    std::vector<int64_t> bias_dims(std::max<size_t>(4, y.dims.size()), 1);
    bias_dims[1] = y.dims[1];
    setup.bias = std::make_shared<CudnnTensor>(y.dtype, bias_dims);
    setup.conv = std::make_shared<CudnnConvolution>(win.pads, win.strides, win.dilations, static_cast<int>(attrs_.group),
                                                    x.dtype, s.tf32);
    setup.shape = std::string(dtype_name(x.dtype)) + " transposed x" + list(x.dims) + " w" + list(w.dims) + " pads " +
                  list(win.pads) + " strides " + list(win.strides) + " dilations " + list(win.dilations) + " group " +
                  std::to_string(attrs_.group) + (x.dtype == DType::kFloat && s.tf32 ? " tf32" : "");
    setup.fma_only = x.dtype == DType::kFloat && !s.tf32;
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    int found = 0;
    const auto asked = std::chrono::steady_clock::now();
    AMP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), setup.w->get(), setup.y->get(),
                                                                setup.conv->get(), setup.x->get(),
                                                                static_cast<int>(perfs.size()), &found, perfs.data()));
    auto data = ranked_algorithms<cudnnConvolutionBwdDataAlgo_t>(
        perfs, found, "transposed convolution", setup, ctx, asked, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), setup.w->get(), setup.y->get(),
                                                              setup.conv->get(), setup.x->get(), a, bytes);
        });
    // The convolution's x is the transposed one's output Y, its y the input X.
    order_by_measured_time<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
        data, setup, y.nbytes(), w.nbytes(), x.nbytes(), ctx, find_backward_data(setup, ctx, data));
    const bool has_bias = s.has_in(2);
    return std::make_unique<PreparedFunction>(
        [setup, data, has_bias](const OpBuffers& b, DeviceContext& c) {
          const float one = 1.0f, zero = 0.0f;
          run_ranked(data, setup.conv->get(), c, [&](const RankedAlgorithm<cudnnConvolutionBwdDataAlgo_t>& a) {
            return cudnnConvolutionBackwardData(c.cudnn(), &one, setup.w->get(), b.in[1], setup.y->get(), b.in[0],
                                                setup.conv->get(), a.algo, b.workspace, a.memory, &zero, setup.x->get(),
                                                b.out[0]);
          });
          if (has_bias)
            AMP_CUDNN_CHECK(cudnnAddTensor(c.cudnn(), &one, setup.bias->get(), b.in[2], &one, setup.x->get(), b.out[0]));
        },
        data.workspace());
  }

 private:
  ConvTransposeAttrs attrs_;
};

// Whether channels-last MaxPoolGrad runs on cuDNN (AMP_CUDA_CUDNN_MAX_POOL_GRAD=1) instead of
// max_pool_grad.cuh's kernel.
bool cudnn_max_pool_grad() {
  return env_flag("AMP_CUDA_CUDNN_MAX_POOL_GRAD");
}

// MaxPool / AveragePool and their gradients (ai.onnx_amp MaxPoolGrad / AveragePoolGrad(dY, X)).
class Pool final : public CudaOp {
 public:
  Pool(const Node& n, int64_t) : attrs_(n), grad_(n.domain() == kAmpDomain) {
    const bool max = n.op_type().rfind("MaxPool", 0) == 0;
    mode_ = max ? CUDNN_POOLING_MAX
                : n.attr_int("count_include_pad", 0) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    if (max && n.outputs().size() > 1 && n.output(1)) throw InputError("MaxPool's Indices output is not supported on cuda");
  }

  // Every operand channels-last: X and Y (forward), dY, X and dX (gradient).
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    const size_t x = grad_ ? 1 : 0;
    if (!s.has_in(x) || !channels_last_case(*s.in[x])) return {};
    ChannelsLastOperands l;
    l.in.assign(s.in.size(), false);
    l.out.assign(s.out.size(), false);
    for (size_t i = 0; i < s.in.size(); ++i) l.in[i] = s.has_in(i);
    l.out[0] = true;
    return l;
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in[grad_ ? 1 : 0];
    const TensorDesc& y = grad_ ? *s.in[0] : *s.out[0];
    if (x.dims.size() < 3) throw InputError("pooling needs [N, C, spatial...] input");
    for (int64_t d : attrs_.dilations)
      if (d != 1) throw InputError("dilated pooling is not supported on cuda");
    const Window w = resolve_window(attrs_, x.dims, y.dims, attrs_.kernel_shape);
    for (size_t d = 2; d < x.dims.size(); ++d) {
      const int64_t floor_size = (x.dims[d] + 2 * w.pads[d - 2] - w.kernel[d - 2]) / w.strides[d - 2] + 1;
      if (floor_size != y.dims[d]) throw InputError("output sizes rounded up (ceil_mode) are not supported on cuda");
    }
    const TensorDesc& dx_or_y = *s.out[0];
    if (x.channels_last != y.channels_last || x.channels_last != dx_or_y.channels_last)
      throw InputError("the pool's operands are not all channels-last or all not");
    auto pool = std::make_shared<CudnnPooling>(mode_, w.kernel, w.pads, w.strides);
    auto xd = std::make_shared<CudnnTensor>(x.dtype, at_least_4d(x.dims), x.channels_last);
    auto yd = std::make_shared<CudnnTensor>(y.dtype, at_least_4d(y.dims), y.channels_last);
    if (!grad_)
      return std::make_unique<PreparedFunction>([pool, xd, yd](const OpBuffers& b, DeviceContext& c) {
        const float one = 1.0f, zero = 0.0f;
        AMP_CUDNN_CHECK(cudnnPoolingForward(c.cudnn(), pool->get(), &one, xd->get(), b.in[0], &zero, yd->get(), b.out[0]));
      });
    // 2-D max pooling over channels-last data: our gather kernel (max_pool_grad.cuh), when the
    // pointers the plan hands it allow its vector loads, unless AMP_CUDA_CUDNN_MAX_POOL_GRAD=1;
    // else cuDNN's backward, which wants the forward's output too: recomputed into the workspace.
    std::optional<MaxPoolGrad2d> own;
    if (mode_ == CUDNN_POOLING_MAX && x.channels_last && x.dims.size() == 4 && x.dims[1] % 8 == 0 &&
        !cudnn_max_pool_grad()) {
      own.emplace();
      fill_window2d(*own, x, y, w.kernel[0], w.kernel[1], w);
    }
    return std::make_unique<PreparedFunction>(
        [own, pool, xd, yd](const OpBuffers& b, DeviceContext& c) {
          if (own) {
            MaxPoolGrad2d run = *own;
            run.dy = b.in[0];
            run.x = b.in[1];
            run.dx = b.out[0];
            if (max_pool_grad_channels_last_fits(run)) {
              max_pool_grad_channels_last(run, c.sm_count(), c.stream());
              return;
            }
          }
          const float one = 1.0f, zero = 0.0f;
          AMP_CUDNN_CHECK(cudnnPoolingForward(c.cudnn(), pool->get(), &one, xd->get(), b.in[1], &zero, yd->get(), b.workspace));
          AMP_CUDNN_CHECK(cudnnPoolingBackward(c.cudnn(), pool->get(), &one, yd->get(), b.workspace, yd->get(), b.in[0],
                                               xd->get(), b.in[1], &zero, xd->get(), b.out[0]));
        },
        y.nbytes());
  }

 private:
  WindowAttrs attrs_;
  bool grad_;
  cudnnPoolingMode_t mode_;
};

std::optional<ConvFusion> match_convolution(const Node* conv, const std::function<bool(const Node*)>& busy) {
  const Value* bias = conv->input(2);
  if (!bias) return std::nullopt;
  const Value* out = conv->output(0);
  const DType t = out->dtype();
  ConvFusion f;
  f.nodes = {conv};
  const Value* z = nullptr;
  const Node* add = only_reader(out);
  if (is_op(add, "Add") && !busy(add) && add->input(0) != add->input(1) && add->output(0)->dtype() == t) {
    const Value* other = add->input(0) == out ? add->input(1) : add->input(0);
    if (other->dtype() == t && same_static_shape(other, out)) {
      z = other;
      f.nodes.push_back(add);
      out = add->output(0);
    }
  }
  const Node* relu = only_reader(out);
  const bool fuse_relu = is_op(relu, "Relu") && !busy(relu);
  if (fuse_relu) {
    f.nodes.push_back(relu);
    out = relu->output(0);
  }
  if (f.nodes.size() == 1) return std::nullopt;  // nothing absorbed: the table's Conv
  f.inputs = {conv->input(0), conv->input(1), bias, z};
  f.outputs = {out};
  f.op = std::make_unique<Conv>(*conv, ConvEpilogue{z != nullptr, fuse_relu});
  return f;
}

}  // namespace

std::vector<ConvFusion> match_convolution_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<ConvFusion> out;
  std::vector<const Node*> taken;
  auto busy = [&](const Node* n) { return excluded(n) || std::find(taken.begin(), taken.end(), n) != taken.end(); };
  for (const Node* n : g.nodes()) {
    if (!is_op(n, "Conv") || busy(n)) continue;
    std::optional<ConvFusion> f = match_convolution(n, busy);
    if (!f) continue;
    taken.insert(taken.end(), f->nodes.begin(), f->nodes.end());
    out.push_back(std::move(*f));
  }
  return out;
}

const std::vector<CudaOpEntry>& convolution_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "Conv", make_op<Conv>},
      {kAmpDomain, "ConvGrad", make_op<ConvGrad>},
      {"", "ConvTranspose", make_op<ConvTranspose>},
      {"", "MaxPool", make_op<Pool>},
      {"", "AveragePool", make_op<Pool>},
      {kAmpDomain, "MaxPoolGrad", make_op<Pool>},
      {kAmpDomain, "AveragePoolGrad", make_op<Pool>},
  };
  return ops;
}

}  // namespace amp::cuda
