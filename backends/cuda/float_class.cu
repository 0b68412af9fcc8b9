// IsNaN and IsInf on the device (float_class.cuh).
#include "backends/cuda/float_class.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

__device__ __forceinline__ double widened(double v) { return v; }
template <class T>
__device__ __forceinline__ float widened(T v) {
  return to_float(v);
}
// The largest finite value: only an infinity lies beyond it.
__device__ __forceinline__ float largest(float) { return 3.40282346638528859812e+38f; }
__device__ __forceinline__ double largest(double) { return 1.79769313486231570815e+308; }

template <class T>
__global__ void __launch_bounds__(256) float_class_kernel(FloatClassTest test, const T* __restrict__ x,
                                                          bool* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto v = widened(x[i]);
    y[i] = test.nan ? v != v : ((test.positive && v > largest(v)) || (test.negative && v < -largest(v)));
  }
}

}  // namespace

void float_class(DType t, const FloatClassTest& test, const void* x, bool* y, int64_t n, int sm_count,
                 cudaStream_t stream) {
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    float_class_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(test, static_cast<const T*>(x), y, n);
    AMP_CUDA_CHECK(cudaGetLastError());
  };
  switch (t) {
    case DType::kFloat: go(float{}); break;
    case DType::kFloat16: go(__half{}); break;
    case DType::kBFloat16: go(__nv_bfloat16{}); break;
    case DType::kDouble: go(double{}); break;
    default:
      throw InputError(std::string(test.nan ? "IsNaN" : "IsInf") + " takes float, float16, bfloat16 or double, not " +
                       std::string(dtype_name(t)));
  }
}

}  // namespace amp::cuda
