// CumSum on the device (cumsum.cuh). Adjacent threads take adjacent inner positions, so a line
// step is one coalesced read when the axis is not the last; along the last axis each thread reads
// a row of its own.
#include "backends/cuda/cumsum.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr const char* kTypes = "CumSum takes float, float16, bfloat16, double, int32, int64, uint32 or uint64, not ";

// The running sum's type and its steps: the element's own (double, the integers), fp32 for the
// 16-bit floats; adds alone, which nothing contracts.
template <class T>
struct Acc {
  using type = T;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
  __device__ static T add(T a, T b) { return a + b; }
};
template <class H>
struct AccHalf {
  using type = float;
  __device__ static float load(H v) { return to_float(v); }
  __device__ static H store(float v) { return from_float<H>(v); }
  __device__ static float add(float a, float b) { return a + b; }
};
template <>
struct Acc<__half> : AccHalf<__half> {};
template <>
struct Acc<__nv_bfloat16> : AccHalf<__nv_bfloat16> {};

template <class T>
__global__ void __launch_bounds__(256) cumsum_kernel(CumSumShape s, const T* __restrict__ x, T* __restrict__ y) {
  using A = Acc<T>;
  const int64_t lines = s.outer * s.inner;
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = l / s.inner * s.extent * s.inner + l % s.inner;
    typename A::type sum = 0;
    for (int64_t k = 0; k < s.extent; ++k) {
      const int64_t at = base + (s.reverse ? s.extent - 1 - k : k) * s.inner;
      const typename A::type v = A::load(x[at]);
      if (!s.exclusive) sum = A::add(sum, v);
      y[at] = A::store(sum);
      if (s.exclusive) sum = A::add(sum, v);
    }
  }
}

}  // namespace

CumSumShape cumsum_shape(DType t, const std::vector<int64_t>& dims, int64_t axis, bool exclusive, bool reverse) {
  if (t != DType::kFloat && t != DType::kFloat16 && t != DType::kBFloat16 && t != DType::kDouble && t != DType::kInt32 &&
      t != DType::kInt64 && t != DType::kUInt32 && t != DType::kUInt64)
    throw InputError(kTypes + std::string(dtype_name(t)));
  const int64_t rank = static_cast<int64_t>(dims.size());
  // A scalar takes axis 0 or -0, as the CPU's normalize_axis lets it.
  if (axis < -rank || axis >= (rank > 0 ? rank : 1))
    throw InputError("CumSum axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  CumSumShape s;
  s.exclusive = exclusive;
  s.reverse = reverse;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < a) s.outer *= dims[d];
    else if (d == a) s.extent = dims[d];
    else s.inner *= dims[d];
  }
  return s;
}

void cumsum(DType t, const CumSumShape& s, const void* x, void* y, int sm_count, cudaStream_t stream) {
  const int64_t lines = s.outer * s.inner;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (lines == 0 || s.extent == 0) return;
    cumsum_kernel<T><<<grid_stride_blocks(lines, sm_count), 256, 0, stream>>>(s, static_cast<const T*>(x),
                                                                            static_cast<T*>(y));
    AMP_CUDA_CHECK(cudaGetLastError());
  };
  switch (t) {
    case DType::kFloat: go(float{}); break;
    case DType::kFloat16: go(__half{}); break;
    case DType::kBFloat16: go(__nv_bfloat16{}); break;
    case DType::kDouble: go(double{}); break;
    case DType::kInt32: go(int32_t{}); break;
    case DType::kInt64: go(int64_t{}); break;
    case DType::kUInt32: go(uint32_t{}); break;
    case DType::kUInt64: go(uint64_t{}); break;
    default: throw InputError(kTypes + std::string(dtype_name(t)));
  }
}

}  // namespace amp::cuda
