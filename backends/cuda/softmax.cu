// Softmax / log-softmax along one axis, statistics in fp32 whatever the storage type: exp() of
// fp16 logits would overflow past 11, and a sum of 50k fp16 terms loses everything after the
// 11th bit. The common case — the axis is the last one (attention rows, classifier outputs) —
// gives each row to one block and reads it twice: once for an online max-and-sum (the running sum
// rescaled whenever the max grows, so one pass finds both), once to write. An inner stride > 1
// (softmax over a middle axis) uses one thread per (outer, inner) position instead.
#include "backends/cuda/softmax.cuh"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

struct MaxSum {
  float max, sum;  // sum of exp(x - max)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  // Not fmaxf: it drops a NaN operand, so a NaN met first (against the -inf start) would vanish
  // from the row. A NaN max makes the sum NaN and every output NaN, as on the CPU backend.
  const float m = (a.max > b.max || a.max != a.max) ? a.max : b.max;
  if (m == -INFINITY) return {m, 0.0f};  // both empty (or all -inf): nothing to rescale
  return {m, a.sum * __expf(a.max - m) + b.sum * __expf(b.max - m)};
}

__device__ __forceinline__ MaxSum block_max_sum(MaxSum v, MaxSum* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = combine(v, o);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : MaxSum{-INFINITY, 0.0f};
    for (int offset = 16; offset > 0; offset >>= 1) {
      MaxSum o{__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)};
      v = combine(v, o);
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

// TX, TY: the storage types of x and y (an absorbed Cast makes them differ); copy, when not null,
// gets y once more as TC (the fp16 copy of an fp32 result that is also read as it is).
// One block per row, up to kRowThreads threads (1024, CUDA's most): at 1024 threads a block gets
// at most 64 registers a thread of the SM's 65536, and __launch_bounds__ makes ptxas keep to that,
// or the launch fails with cudaErrorLaunchOutOfResources (tests/backends/kernel_resources.py
// checks the compiled kernels against their bounds).
constexpr int kRowThreads = 1024;

template <class TX, class TY, class TC>
__global__ void __launch_bounds__(kRowThreads)
    softmax_rows_kernel(const TX* __restrict__ x, TY* __restrict__ y, TC* __restrict__ copy, int64_t cols,
                        bool log) {
  __shared__ MaxSum scratch[32];
  const TX* row = x + blockIdx.x * cols;
  TY* out = y + blockIdx.x * cols;
  TC* out_copy = copy ? copy + blockIdx.x * cols : nullptr;
  MaxSum acc{-INFINITY, 0.0f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc = combine(acc, MaxSum{to_float(row[c]), 1.0f});
  const MaxSum total = block_max_sum(acc, scratch);
  // expf, not __expf, for what is stored: the fast version is off by a few ulp near the max.
  const float log_sum = logf(total.sum);
  const float inv_sum = 1.0f / total.sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float shifted = to_float(row[c]) - total.max;
    const TY v = from_float<TY>(log ? shifted - log_sum : expf(shifted) * inv_sum);
    out[c] = v;
    if (out_copy) out_copy[c] = from_float<TC>(to_float(v));
  }
}

template <class TX, class TY, class TC>
__global__ void softmax_strided_kernel(const TX* __restrict__ x, TY* __restrict__ y, TC* __restrict__ copy,
                                       int64_t outer, int64_t axis, int64_t inner, bool log) {
  const int64_t pos = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pos >= outer * inner) return;
  const int64_t base = (pos / inner) * axis * inner + pos % inner;
  MaxSum acc{-INFINITY, 0.0f};
  for (int64_t c = 0; c < axis; ++c) acc = combine(acc, MaxSum{to_float(x[base + c * inner]), 1.0f});
  const float log_sum = logf(acc.sum), inv_sum = 1.0f / acc.sum;
  for (int64_t c = 0; c < axis; ++c) {
    const float shifted = to_float(x[base + c * inner]) - acc.max;
    const TY v = from_float<TY>(log ? shifted - log_sum : expf(shifted) * inv_sum);
    y[base + c * inner] = v;
    if (copy) copy[base + c * inner] = from_float<TC>(to_float(v));
  }
}

// dx = y (dy - sum(dy y)) over a row: the row's sum in fp32 over the block (TDY, TDX: the storage
// types of dy and dx, which absorbed Casts make differ from y's).
template <class TDY, class TY, class TDX>
__global__ void __launch_bounds__(kRowThreads)
    softmax_grad_rows_kernel(const TDY* __restrict__ dy, const TY* __restrict__ y, TDX* __restrict__ dx,
                             int64_t cols) {
  __shared__ float scratch[32];
  const int64_t offset = blockIdx.x * cols;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += to_float(dy[offset + c]) * to_float(y[offset + c]);
  dot = block_sum(dot, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dx[offset + c] = from_float<TDX>(to_float(y[offset + c]) * (to_float(dy[offset + c]) - dot));
}

template <class TDY, class TY, class TDX>
__global__ void softmax_grad_strided_kernel(const TDY* __restrict__ dy, const TY* __restrict__ y, TDX* __restrict__ dx,
                                            int64_t outer, int64_t axis, int64_t inner) {
  const int64_t pos = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pos >= outer * inner) return;
  const int64_t base = (pos / inner) * axis * inner + pos % inner;
  float dot = 0.0f;
  for (int64_t c = 0; c < axis; ++c) dot += to_float(dy[base + c * inner]) * to_float(y[base + c * inner]);
  for (int64_t c = 0; c < axis; ++c) {
    const int64_t at = base + c * inner;
    dx[at] = from_float<TDX>(to_float(y[at]) * (to_float(dy[at]) - dot));
  }
}

template <class TX, class TY, class TC>
void launch_softmax(const void* x, void* y, void* copy, int64_t outer, int64_t axis, int64_t inner, bool log,
                    cudaStream_t stream) {
  if (inner == 1) {
    // 1024 threads for long rows (a 50k vocabulary), fewer for short ones (attention over T=32).
    const int threads = axis >= 4096 ? kRowThreads : axis >= 512 ? 256 : 64;
    softmax_rows_kernel<TX, TY, TC><<<static_cast<unsigned>(outer), threads, 0, stream>>>(
        static_cast<const TX*>(x), static_cast<TY*>(y), static_cast<TC*>(copy), axis, log);
  } else {
    const int64_t n = outer * inner;
    softmax_strided_kernel<TX, TY, TC><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
        static_cast<const TX*>(x), static_cast<TY*>(y), static_cast<TC*>(copy), outer, axis, inner, log);
  }
}

}  // namespace

void softmax_forward(DType x_type, DType y_type, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner,
                     bool log, cudaStream_t stream, void* copy, DType copy_type) {
  if (outer * axis * inner == 0) return;
  if (copy && (y_type != DType::kFloat || (copy_type != DType::kFloat16 && copy_type != DType::kBFloat16)))
    throw InputError("Softmax: a second copy of the result is an fp16/bf16 one of an fp32 result");
  dispatch_float(x_type, "Softmax", [&](auto x_tag) {
    using TX = decltype(x_tag);
    if (copy) {
      dispatch_float(copy_type, "Softmax", [&](auto c_tag) {
        launch_softmax<TX, float, decltype(c_tag)>(x, y, copy, outer, axis, inner, log, stream);
      });
      return;
    }
    dispatch_float(y_type, "Softmax", [&](auto y_tag) {
      using TY = decltype(y_tag);
      launch_softmax<TX, TY, TY>(x, y, nullptr, outer, axis, inner, log, stream);
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void softmax_backward(DType y_type, DType dy_type, DType dx_type, const void* dy, const void* y, void* dx, int64_t outer,
                      int64_t axis, int64_t inner, cudaStream_t stream) {
  if (outer * axis * inner == 0) return;
  dispatch_io(y_type, dy_type, dx_type, "SoftmaxGrad", [&](auto dy_tag, auto y_tag, auto dx_tag) {
    using TDY = decltype(dy_tag);
    using TY = decltype(y_tag);
    using TDX = decltype(dx_tag);
    if (inner == 1) {
      const int threads = axis >= 4096 ? kRowThreads : axis >= 512 ? 256 : 64;
      softmax_grad_rows_kernel<TDY, TY, TDX><<<static_cast<unsigned>(outer), threads, 0, stream>>>(
          static_cast<const TDY*>(dy), static_cast<const TY*>(y), static_cast<TDX*>(dx), axis);
    } else {
      const int64_t n = outer * inner;
      softmax_grad_strided_kernel<TDY, TY, TDX><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
          static_cast<const TDY*>(dy), static_cast<const TY*>(y), static_cast<TDX*>(dx), outer, axis, inner);
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
