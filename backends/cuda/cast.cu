// Cast on the device (cast.cuh): a thread per element in a grid-stride loop, one kernel per pair
// of types.
#include "backends/cuda/cast.cuh"

#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class T>
constexpr bool is_16bit_float = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The value as C++ arithmetic: 16-bit floats widened (exactly), the rest as they are.
template <class T>
__device__ __forceinline__ auto arithmetic(T v) {
  if constexpr (is_16bit_float<T>) return to_float(v);
  else return v;
}

template <class To, class From>
__device__ __forceinline__ To converted(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (is_16bit_float<To>) return from_float<To>(static_cast<float>(arithmetic(v)));
  else if constexpr (std::is_same_v<To, bool>) return arithmetic(v) != 0;
  else return static_cast<To>(arithmetic(v));
}

template <class To, class From>
__global__ void __launch_bounds__(256) cast_kernel(int64_t n, const From* __restrict__ x, To* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = converted<To>(x[i]);
}

// Calls f(T{}) for the storage type of t; false for a type this file does not cast.
template <class F>
bool dispatch_castable(DType t, F&& f) {
  switch (t) {
    case DType::kBool: f(bool{}); return true;
    case DType::kUInt8: f(uint8_t{}); return true;
    case DType::kInt8: f(int8_t{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    case DType::kFloat: f(float{}); return true;
    case DType::kFloat16: f(__half{}); return true;
    case DType::kBFloat16: f(__nv_bfloat16{}); return true;
    default: return false;
  }
}

}  // namespace

bool cast_supported(DType from, DType to) {
  return dispatch_castable(from, [](auto) {}) && dispatch_castable(to, [](auto) {});
}

void cast(DType from, DType to, int64_t n, const void* x, void* y, int sm_count, cudaStream_t stream) {
  if (!cast_supported(from, to))
    throw InputError("Cast from " + std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                     " does not run on the device");
  if (n == 0) return;
  dispatch_castable(from, [&](auto f) {
    using From = decltype(f);
    dispatch_castable(to, [&](auto t) {
      using To = decltype(t);
      cast_kernel<To, From><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(n, static_cast<const From*>(x),
                                                                                   static_cast<To*>(y));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
