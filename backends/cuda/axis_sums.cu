#include "backends/cuda/axis_sums.cuh"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

// fp32 sums for fp32, fp16 and bf16 (the device's rule), fp64 for double.
template <class T>
struct Sum {
  using type = float;
  __device__ static float load(T v) { return to_float(v); }
  __device__ static T store(float v) { return from_float<T>(v); }
};
template <>
struct Sum<double> {
  using type = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};

template <class T>
__global__ void axis_sums_kernel(AxisSumShape s, const int64_t* __restrict__ offsets, const int64_t* __restrict__ index,
                                 const double* __restrict__ weight, const T* __restrict__ dy, T* __restrict__ dx,
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
    using A = typename Sum<T>::type;
    A acc = 0;
    while (!none) {
      int64_t off = 0;
      A w = 1;
      for (int a = 0; a < s.rank; ++a) {
        off += index[at[a]] * stride[a];
        if (s.weighted) w *= static_cast<A>(weight[at[a]]);
      }
      acc += s.weighted ? w * Sum<T>::load(dy[off]) : Sum<T>::load(dy[off]);
      // The next combination, the last axis fastest (dY's order).
      int a = s.rank - 1;
      for (; a >= 0; --a) {
        if (++at[a] < hi[a]) break;
        at[a] = lo[a];
      }
      if (a < 0) break;
    }
    dx[e] = Sum<T>::store(acc);
  }
}

}  // namespace

void axis_sums(const AxisSumShape& s, const int64_t* offsets, const int64_t* index, const double* weight, const void* dy,
               void* dx, int sm_count, cudaStream_t stream) {
  int64_t n = 1;
  for (int a = 0; a < s.rank; ++a) n *= s.in[a];
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    axis_sums_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, offsets, index, weight,
                                                                             static_cast<const T*>(dy), static_cast<T*>(dx), n);
    AMP_CUDA_CHECK(cudaGetLastError());
  };
  if (s.type == DType::kDouble) launch(double{});
  else dispatch_float(s.type, "gradient", launch);
}

}  // namespace amp::cuda
