// Dropout. Each element's keep decision is a hash of (run seed, node salt, element index) — a
// counter-based generator like Philox: no generator state to carry between runs or threads, the
// same seed reproduces the same mask, and the seed comes from device memory so a captured CUDA
// Graph draws a new mask on every replay (the executable writes a fresh seed before each run).
#include "backends/cuda/dropout.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

__device__ __forceinline__ unsigned long long mix(unsigned long long x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, bool* __restrict__ mask, long long n,
                               float ratio, float scale, const unsigned long long* __restrict__ seed,
                               unsigned long long salt) {
  const unsigned long long key = mix(*seed ^ salt);
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    // 24 random bits: a uniform float in [0, 1) with every value exactly representable.
    const float u = static_cast<float>(mix(key + static_cast<unsigned long long>(i)) >> 40) * (1.0f / 16777216.0f);
    const bool keep = u >= ratio;
    y[i] = from_float<T>(keep ? to_float(x[i]) * scale : 0.0f);
    if (mask) mask[i] = keep;
  }
}

}  // namespace

void dropout_forward(DType t, const void* x, void* y, bool* mask, int64_t n, float ratio, const unsigned long long* seed,
                     uint64_t salt, int sm_count, cudaStream_t stream) {
  if (n == 0) return;
  const float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
  const unsigned blocks = grid_stride_blocks(n, sm_count);
  dispatch_float(t, "Dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), mask, n, ratio, scale,
                                                  seed, salt);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
