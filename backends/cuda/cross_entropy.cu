// Softmax cross-entropy without materialising the probabilities (the llm.c classifier fusion): a
// block per row finds max and sum of exp in one online pass (contiguous rows 8 elements a thread
// with vector loads, float_types.cuh's for_row), the loss is logsumexp - x[label],
// and the backward pass recomputes softmax from the scores and writes (p - onehot) * scale
// directly — for a GPT-2 vocabulary that is one [rows, 50257] tensor never written or read back.
// Everything is fp32 inside; the reduction over rows is a second, single-block kernel so the
// result does not depend on atomics' order (bit-identical runs).
#include "backends/cuda/cross_entropy.cuh"

#include "backends/cuda/arg_best.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

struct RowStats {
  float max, sum;
};

__device__ __forceinline__ RowStats merge(RowStats a, RowStats b) {
  // Not fmaxf, which drops a NaN operand: a NaN score must make the row's loss NaN (the CPU
  // backend's), not vanish when it is the first value a thread sees.
  const float m = (a.max > b.max || a.max != a.max) ? a.max : b.max;
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.sum * __expf(a.max - m) + b.sum * __expf(b.max - m)};
}

// acc merged with one element v, as merge(acc, {v, 1}) computes it, with one exponential where the
// element is below a finite maximum (most of a row: merge's other factor is exp(0) = 1 then). A
// thread takes 1,570 of GPT-2's 50,257 scores; merge's two exponentials for each made the loss and
// its gradient over [8192, 50257] bf16 scores 0.8 and 1.75 ms on an H100.
__device__ __forceinline__ RowStats add_element(RowStats acc, float v) {
  if (acc.max > v && acc.max - acc.max == 0.0f) return {acc.max, acc.sum + __expf(v - acc.max)};
  return merge(acc, RowStats{v, 1.0f});
}

// max and sum of exp(x - max) of one row, element c at row[c * inner], for the whole block. With
// `argmax` (inner == 1), also the row's ArgMax as ArgMax computes it (arg_best.cuh), into *argmax
// by thread 0: the step's accuracy count reads the scores in the same pass.
template <class T>
__device__ RowStats row_stats(const T* row, int64_t classes, int64_t inner, int64_t* argmax = nullptr,
                              bool last = false) {
  __shared__ RowStats scratch[32];
  RowStats acc{-INFINITY, 0.0f};
  if (inner == 1 && argmax) {
    float best = 0.0f;
    int64_t at = -1;
    for_row(row, classes, [&](int64_t c, float v) {
      acc = add_element(acc, v);
      if (arg_wins(v, c, best, at, true, last)) {
        best = v;
        at = c;
      }
    });
    at = arg_block_best(best, at, true, last);
    if (threadIdx.x == 0) *argmax = at;
  } else if (inner == 1) {
    for_row(row, classes, [&](int64_t, float v) { acc = add_element(acc, v); });
  } else
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) acc = add_element(acc, to_float(row[c * inner]));
  for (int offset = 16; offset > 0; offset >>= 1)
    acc = merge(acc, RowStats{__shfl_xor_sync(0xffffffffu, acc.max, offset), __shfl_xor_sync(0xffffffffu, acc.sum, offset)});
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < blockDim.x / 32 ? scratch[lane] : RowStats{-INFINITY, 0.0f};
    for (int offset = 16; offset > 0; offset >>= 1)
      acc = merge(acc, RowStats{__shfl_xor_sync(0xffffffffu, acc.max, offset), __shfl_xor_sync(0xffffffffu, acc.sum, offset)});
    if (lane == 0) scratch[0] = acc;
  }
  __syncthreads();
  return scratch[0];
}

template <class L>
__device__ __forceinline__ int64_t label_at(const L* labels, int64_t r) {
  return static_cast<int64_t>(labels[r]);
}

// The label's weight, 0 for an ignored row; an out-of-range label gives NaN, which the step's
// inf/NaN check then reports (a kernel cannot throw).
template <class T, class L>
__device__ __forceinline__ float row_weight(const L* labels, const T* weights, int64_t r, int64_t classes,
                                            bool has_ignore, int64_t ignore) {
  const int64_t label = label_at(labels, r);
  if (has_ignore && label == ignore) return 0.0f;
  if (label < 0 || label >= classes) return NAN;
  return weights ? to_float(weights[label]) : 1.0f;
}

// One block per row r = (i, j) of [n, inner]: loss_r, weight_r into scratch; log_prob if asked.
// TS: the scores' storage type (float16/bfloat16 with float T where the op absorbed the widening
// Cast: the scores are widened as they are read, exactly).
template <class T, class L, class TS>
__global__ void __launch_bounds__(kThreads) forward_rows(const TS* __restrict__ scores, const L* __restrict__ labels, const T* __restrict__ weights,
                             T* __restrict__ log_prob, float* __restrict__ row_loss, float* __restrict__ row_weight_out,
                             int64_t* __restrict__ argmax, bool argmax_last,
                             int64_t classes, int64_t inner, int64_t pitch, bool has_ignore, int64_t ignore) {
  const int64_t r = blockIdx.x;
  const int64_t base = (r / inner) * classes * inner + r % inner;
  const TS* row = scores + (inner == 1 ? r * pitch : base);
  const RowStats s = row_stats(row, classes, inner, argmax ? argmax + r : nullptr, argmax_last);
  const float lse = s.max + logf(s.sum);
  if (log_prob)
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      log_prob[base + c * inner] = from_float<T>(to_float(row[c * inner]) - lse);
  if (threadIdx.x == 0) {
    const float w = row_weight(labels, weights, r, classes, has_ignore, ignore);
    const int64_t label = label_at(labels, r);
    const bool counted = w == w && w != 0.0f;
    row_loss[r] = counted ? -(to_float(row[label * inner]) - lse) * w : (w == w ? 0.0f : NAN);
    row_weight_out[r] = w;
  }
}

// One block of kReduceThreads (1024, CUDA's most): at most 64 registers a thread of the SM's 65536,
// which __launch_bounds__ makes ptxas keep to (else the launch fails with
// cudaErrorLaunchOutOfResources).
constexpr int kReduceThreads = 1024;

// One block: the reduction of the row losses into the scalar loss (or the copy for kNone).
template <class T>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_loss(const float* __restrict__ row_loss, const float* __restrict__ row_weight, int64_t rows,
                int reduction, T* __restrict__ loss) {
  __shared__ float scratch[32];
  if (reduction == static_cast<int>(LossReduction::kNone)) {
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) loss[r] = from_float<T>(row_loss[r]);
    return;
  }
  float sum = 0.0f, weight = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    sum += row_loss[r];
    weight += row_weight[r];
  }
  sum = block_sum(sum, scratch);
  weight = block_sum(weight, scratch);
  if (threadIdx.x == 0)
    loss[0] = from_float<T>(reduction == static_cast<int>(LossReduction::kMean) ? sum / weight : sum);
}

template <class T, class L>
__global__ void __launch_bounds__(kReduceThreads)
    total_weight(const L* __restrict__ labels, const T* __restrict__ weights, int64_t rows, int64_t classes,
                 bool has_ignore, int64_t ignore, float* __restrict__ out) {
  __shared__ float scratch[32];
  float w = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) w += row_weight(labels, weights, r, classes, has_ignore, ignore);
  w = block_sum(w, scratch);
  if (threadIdx.x == 0) out[0] = w;
}

// TG: the storage type of dscores (float16/bfloat16 from float scores where the op absorbed a Cast);
// TS: the scores' (float16/bfloat16 where it absorbed the widening Cast before it).
template <class T, class L, class TG, class TS>
__global__ void __launch_bounds__(kThreads) backward_rows(const T* __restrict__ dloss, const TS* __restrict__ scores, const L* __restrict__ labels,
                              const T* __restrict__ weights, const float* __restrict__ weight_total,
                              TG* __restrict__ dscores, int64_t classes, int64_t inner, int64_t pitch,
                              int64_t grad_pitch, int reduction, bool has_ignore, int64_t ignore) {
  const int64_t r = blockIdx.x;
  const int64_t base = (r / inner) * classes * inner + r % inner;
  const TS* row = scores + (inner == 1 ? r * pitch : base);
  const RowStats s = row_stats(row, classes, inner);
  const float w = row_weight(labels, weights, r, classes, has_ignore, ignore);
  const int64_t label = label_at(labels, r);
  float scale = w * to_float(dloss[reduction == static_cast<int>(LossReduction::kNone) ? r : 0]);
  if (reduction == static_cast<int>(LossReduction::kMean)) scale /= weight_total[0];
  // A row of weight 0 (ignored) scales by exactly 0, also when every row is ignored (0 / 0 above),
  // so its gradient is 0 — NaN where its scores are, as PyTorch's and the CPU backend's.
  if (w == 0.0f) scale = 0.0f;
  const float inv_sum = 1.0f / s.sum;
  auto gradient = [&](int64_t c, float x) {
    const float p = expf(x - s.max) * inv_sum;
    return (p - (c == label ? 1.0f : 0.0f)) * scale;
  };
  if (inner == 1) {
    TG* out = dscores + r * grad_pitch;
    map_row(row, out, classes, gradient);
    for (int64_t c = classes + threadIdx.x; c < grad_pitch; c += blockDim.x) out[c] = from_float<TG>(0.0f);
    return;
  }
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    dscores[base + c * inner] = from_float<TG>(gradient(c, to_float(row[c * inner])));
}

// f(TS{}) with TS the scores' storage type: T's when `scores` is undefined or T's type; a 16-bit
// type only under float T (an absorbed Cast).
template <class T, class F>
void dispatch_scores(DType t, DType scores, const char* what, F&& f) {
  if (scores == DType::kUndefined || scores == t) {
    f(T{});
    return;
  }
  if (t != DType::kFloat)
    throw InputError(std::string(what) + ": " + std::string(dtype_name(scores)) + " scores under a " +
                     std::string(dtype_name(t)) + " loss; only a float loss reads scores of another type");
  dispatch_float(scores, what, [&](auto tag) { f(tag); });
}

template <class F>
void dispatch_labels(DType t, F&& f) {
  if (t == DType::kInt64) f(int64_t{});
  else if (t == DType::kInt32) f(int32_t{});
  else throw InputError("labels must be int32 or int64, not " + std::string(dtype_name(t)));
}

}  // namespace

size_t cross_entropy_workspace(const CrossEntropyShape& s) {
  return static_cast<size_t>(2 * s.n * s.inner + 1) * sizeof(float);
}

void cross_entropy_forward(const CrossEntropyShape& s, const void* scores, const void* labels, const void* weights,
                           void* loss, void* log_prob, void* workspace, cudaStream_t stream, int64_t* argmax) {
  if (argmax && s.inner != 1) throw Error("internal: the loss finds each row's ArgMax only over [N, C] scores");
  const int64_t rows = s.n * s.inner;
  float* row_loss = static_cast<float*>(workspace);
  float* row_w = row_loss + rows;
  dispatch_float(s.type, "SoftmaxCrossEntropyLoss", [&](auto tag) {
    using T = decltype(tag);
    dispatch_labels(s.label_type, [&](auto ltag) {
      using L = decltype(ltag);
      dispatch_scores<T>(s.type, s.score_type, "SoftmaxCrossEntropyLoss", [&](auto stag) {
        using TS = decltype(stag);
        // No rows: no row blocks (a grid of 0 is an invalid launch), but the scalar loss is still
        // written below: 0 for sum, 0/0 = NaN for mean, as on the CPU backend.
        if (rows > 0)
          forward_rows<T, L, TS><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
            static_cast<const TS*>(scores), static_cast<const L*>(labels), static_cast<const T*>(weights),
            static_cast<T*>(log_prob), row_loss, row_w, argmax, s.argmax_last, s.classes, s.inner,
            s.score_pitch ? s.score_pitch : s.classes,
            s.ignore_index.has_value(), s.ignore_index.value_or(0));
      });
    });
    reduce_loss<T><<<1, kReduceThreads, 0, stream>>>(row_loss, row_w, rows, static_cast<int>(s.reduction),
                                                     static_cast<T*>(loss));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_backward(const CrossEntropyShape& s, const void* dloss, const void* scores, const void* labels,
                            const void* weights, void* dscores, void* workspace, cudaStream_t stream) {
  const int64_t rows = s.n * s.inner;
  if (rows == 0) return;
  float* weight_total = static_cast<float*>(workspace);
  const DType grad_type = s.grad_type == DType::kUndefined ? s.type : s.grad_type;
  dispatch_io(s.type, s.type, grad_type, "SoftmaxCrossEntropyLossGrad", [&](auto, auto tag, auto grad_tag) {
    using T = decltype(tag);
    using TG = decltype(grad_tag);
    dispatch_labels(s.label_type, [&](auto ltag) {
      using L = decltype(ltag);
      if (s.reduction == LossReduction::kMean)
        total_weight<T, L><<<1, kReduceThreads, 0, stream>>>(static_cast<const L*>(labels),
                                                             static_cast<const T*>(weights), rows, s.classes,
                                                             s.ignore_index.has_value(), s.ignore_index.value_or(0),
                                                             weight_total);
      dispatch_scores<T>(s.type, s.score_type, "SoftmaxCrossEntropyLossGrad", [&](auto stag) {
        using TS = decltype(stag);
        backward_rows<T, L, TG, TS><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
            static_cast<const T*>(dloss), static_cast<const TS*>(scores), static_cast<const L*>(labels),
            static_cast<const T*>(weights), weight_total, static_cast<TG*>(dscores), s.classes, s.inner,
            s.score_pitch ? s.score_pitch : s.classes, s.grad_pitch ? s.grad_pitch : s.classes,
            static_cast<int>(s.reduction), s.ignore_index.has_value(), s.ignore_index.value_or(0));
      });
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
