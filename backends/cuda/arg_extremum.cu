#include "backends/cuda/arg_extremum.cuh"

#include <algorithm>

#include "backends/cuda/arg_best.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kRowThreads = 512;

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    arg_rows(const T* __restrict__ x, int64_t* __restrict__ out, int64_t r, int64_t pitch, bool max, bool last) {
  const T* row = x + blockIdx.x * pitch;
  float best = 0.0f;
  int64_t at = -1;
  // Any visiting order gives the same winner: arg_wins() breaks ties by index.
  for_row(row, r, [&](int64_t k, float v) {
    if (arg_wins(v, k, best, at, max, last)) {
      best = v;
      at = k;
    }
  });
  at = arg_block_best(best, at, max, last);
  if (threadIdx.x == 0) out[blockIdx.x] = at;
}

template <class T>
__global__ void arg_columns(const T* __restrict__ x, int64_t* __restrict__ out, int64_t outer, int64_t r, int64_t inner,
                            bool max, bool last) {
  for (int64_t pos = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* lane = x + (pos / inner) * r * inner + pos % inner;
    float best = to_float(lane[0]);
    int64_t at = 0;
    for (int64_t k = 1; k < r; ++k) {
      const float v = to_float(lane[k * inner]);
      if (arg_wins(v, k, best, at, max, last)) {
        best = v;
        at = k;
      }
    }
    out[pos] = at;
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    one_hot_kernel(ArgExtremumShape s, const int64_t* __restrict__ at, T* __restrict__ y) {
  const int64_t n = s.outer * s.r * s.inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % s.inner, k = e / s.inner % s.r, o = e / (s.inner * s.r);
    y[e] = from_float<T>(at[o * s.inner + i] == k ? 1.0f : 0.0f);
  }
}

}  // namespace

void one_hot_at(DType t, const ArgExtremumShape& s, const int64_t* at, void* y, int sm_count, cudaStream_t stream) {
  const int64_t n = s.outer * s.r * s.inner;
  if (n == 0) return;
  dispatch_float(t, "Hardmax", [&](auto tag) {
    using T = decltype(tag);
    one_hot_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, at, static_cast<T*>(y));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void arg_extremum(DType t, const ArgExtremumShape& s, const void* x, int64_t* out, cudaStream_t stream) {
  if (s.outer * s.inner == 0) return;
  dispatch_float(t, s.max ? "ArgMax" : "ArgMin", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    if (s.inner == 1) {
      arg_rows<T><<<static_cast<unsigned>(s.outer), s.r >= 2048 ? kRowThreads : 128, 0, stream>>>(
          in, out, s.r, s.pitch ? s.pitch : s.r, s.max, s.last);
    } else {
      const int64_t blocks = std::min<int64_t>((s.outer * s.inner + 255) / 256, 65535);
      arg_columns<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(in, out, s.outer, s.r, s.inner, s.max, s.last);
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
