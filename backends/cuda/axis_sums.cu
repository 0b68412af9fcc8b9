#include "backends/cuda/axis_sums.cuh"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

template <class T>
__global__ void axis_sums_kernel(AxisSumShape s, const int64_t* __restrict__ offsets, const int64_t* __restrict__ index,
                                 const float* __restrict__ weight, const T* __restrict__ dy, T* __restrict__ dx,
                                 int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t lo[kMaxAxisSumRank], hi[kMaxAxisSumRank], at[kMaxAxisSumRank], stride[kMaxAxisSumRank];
    int64_t rest = e, step = 1;
    bool none = false;
    for (int a = s.rank - 1; a >= 0; --a) {
      const int64_t i = rest % s.in[a];
      rest /= s.in[a];
      lo[a] = offsets[s.first[a] + i];
      hi[a] = offsets[s.first[a] + i + 1];
      at[a] = lo[a];
      none = none || lo[a] == hi[a];
      stride[a] = step;
      step *= s.out[a];
    }
    float acc = 0.0f;
    while (!none) {
      int64_t off = 0;
      float w = 1.0f;
      for (int a = 0; a < s.rank; ++a) {
        off += index[at[a]] * stride[a];
        if (s.weighted) w *= weight[at[a]];
      }
      acc += s.weighted ? w * to_float(dy[off]) : to_float(dy[off]);
      // The next combination, the last axis fastest (dY's order).
      int a = s.rank - 1;
      for (; a >= 0; --a) {
        if (++at[a] < hi[a]) break;
        at[a] = lo[a];
      }
      if (a < 0) break;
    }
    dx[e] = from_float<T>(acc);
  }
}

}  // namespace

void axis_sums(const AxisSumShape& s, const int64_t* offsets, const int64_t* index, const float* weight, const void* dy,
               void* dx, int sm_count, cudaStream_t stream) {
  int64_t n = 1;
  for (int a = 0; a < s.rank; ++a) n *= s.in[a];
  if (n == 0) return;
  dispatch_float(s.type, "gradient", [&](auto tag) {
    using T = decltype(tag);
    axis_sums_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, offsets, index, weight,
                                                                             static_cast<const T*>(dy), static_cast<T*>(dx), n);
    AMP_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace amp::cuda
