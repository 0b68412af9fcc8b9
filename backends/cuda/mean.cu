// Mean on the device (mean.cuh).
#include "backends/cuda/mean.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

struct MeanOperands {
  const void* data[kMaxBroadcastOperands];
};

__device__ __forceinline__ double widened(double v) { return v; }
template <class T>
__device__ __forceinline__ float widened(T v) {
  return to_float(v);
}
__device__ __forceinline__ double narrowed(double v, double) { return v; }
template <class T>
__device__ __forceinline__ T narrowed(float v, T) {
  return from_float<T>(v);
}

template <class T>
__global__ void __launch_bounds__(256) mean_kernel(BroadcastOperands b, MeanOperands in, T* __restrict__ out) {
  using C = decltype(widened(T{}));
  const C count = static_cast<C>(b.operands);
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < b.numel;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    C acc = 0;
    for (int k = 0; k < b.operands; ++k) {
      int64_t at = 0, rest = o;
      for (int d = b.rank - 1; d >= 0; --d) {
        at += rest % b.dims[d] * b.strides[k][d];
        rest /= b.dims[d];
      }
      const C v = widened(static_cast<const T*>(in.data[k])[at]);
      acc = k == 0 ? v : acc + v;
    }
    out[o] = narrowed(acc / count, T{});
  }
}

}  // namespace

void mean(DType t, const BroadcastOperands& b, const std::vector<const void*>& operands, void* out, int sm_count,
          cudaStream_t stream) {
  MeanOperands in{};
  for (int k = 0; k < b.operands; ++k) in.data[k] = operands[static_cast<size_t>(k)];
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (b.numel == 0) return;
    mean_kernel<T><<<grid_stride_blocks(b.numel, sm_count), 256, 0, stream>>>(b, in, static_cast<T*>(out));
    AMP_CUDA_CHECK(cudaGetLastError());
  };
  switch (t) {
    case DType::kFloat: go(float{}); break;
    case DType::kFloat16: go(__half{}); break;
    case DType::kBFloat16: go(__nv_bfloat16{}); break;
    case DType::kDouble: go(double{}); break;
    default: throw InputError("Mean takes float, float16, bfloat16 or double, not " + std::string(dtype_name(t)));
  }
}

}  // namespace amp::cuda
