// LRN on the device (lrn.cuh): a thread per output element in a grid-stride loop, reading its
// channel window from global memory (a window is at most `size` loads, usually 5).
#include "backends/cuda/lrn.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(256) lrn_kernel(LrnShape s, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t n = s.batches * s.channels * s.inner;
  const int64_t before = (s.size - 1) / 2, after = s.size - 1 - before;
  const float scale = s.alpha / static_cast<float>(s.size);
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % s.inner, r = t / s.inner, c = r % s.channels, b = r / s.channels;
    const int64_t lo = c - before < 0 ? 0 : c - before;
    const int64_t hi = c + after > s.channels - 1 ? s.channels - 1 : c + after;
    float sum = 0.0f;
    for (int64_t k = lo; k <= hi; ++k) {
      const float v = to_float(x[(b * s.channels + k) * s.inner + i]);
      sum = __fadd_rn(sum, __fmul_rn(v, v));
    }
    const float base = __fadd_rn(s.bias, __fmul_rn(scale, sum));
    y[t] = from_float<T>(__fdiv_rn(to_float(x[t]), powf(base, s.beta)));
  }
}

}  // namespace

LrnShape lrn_shape(const std::vector<int64_t>& dims, int64_t size, float alpha, float beta, float bias) {
  if (dims.size() < 2) throw InputError("LRN: the input must be [N, C, ...], not of rank " + std::to_string(dims.size()));
  if (size < 1) throw InputError("LRN needs a positive 'size', not " + std::to_string(size));
  LrnShape s;
  s.batches = dims[0];
  s.channels = dims[1];
  s.inner = 1;
  for (size_t d = 2; d < dims.size(); ++d) s.inner *= dims[d];
  s.size = size;
  s.alpha = alpha;
  s.beta = beta;
  s.bias = bias;
  return s;
}

void lrn(DType t, const LrnShape& s, const void* x, void* y, int sm_count, cudaStream_t stream) {
  const int64_t n = s.batches * s.channels * s.inner;
  if (n == 0) return;
  dispatch_float(t, "LRN", [&](auto tag) {
    using T = decltype(tag);
    lrn_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, static_cast<const T*>(x), static_cast<T*>(y));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
