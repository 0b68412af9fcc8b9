// InstanceNormalization and MeanVarianceNormalization on the device (instance_norm.cuh): a block
// of 256 threads per group, in a grid-stride loop over the groups, reads its group three times —
// the sum, the squared deviations from the mean, the output — accumulating in fp64 with explicit
// _rn steps, so nvcc contracts nothing into a fused multiply-add the CPU does not do.
#include "backends/cuda/instance_norm.cuh"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

// Sum over the block in fp64, returned to every thread (scratch: a double per warp).
__device__ __forceinline__ double block_sum_fp64(double v, double* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read by the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0;
  for (int offset = 16; offset > 0; offset >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The group's mean and biased variance (the mean of the squared deviations), two passes over the
// n members at x[at(j)].
template <class T, class At>
__device__ void moments(const T* x, int64_t n, At at, double* scratch, double& mean, double& var) {
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum = __dadd_rn(sum, static_cast<double>(to_float(x[at(j)])));
  mean = block_sum_fp64(sum, scratch) / static_cast<double>(n);
  double sq = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const double d = __dsub_rn(static_cast<double>(to_float(x[at(j)])), mean);
    sq = __dadd_rn(sq, __dmul_rn(d, d));
  }
  var = block_sum_fp64(sq, scratch) / static_cast<double>(n);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    instance_norm_kernel(InstanceNormShape s, const T* __restrict__ x, const T* __restrict__ scale,
                         const T* __restrict__ bias, T* __restrict__ y) {
  __shared__ double scratch[32];
  for (int64_t p = blockIdx.x; p < s.planes; p += gridDim.x) {
    const T* plane = x + p * s.size;
    double mean, var;
    moments(plane, s.size, [](int64_t j) { return j; }, scratch, mean, var);
    const float inv = static_cast<float>(1.0 / sqrt(__dadd_rn(var, static_cast<double>(s.epsilon))));
    const float m = static_cast<float>(mean);
    const int64_t c = p % s.channels;
    const float g = to_float(scale[c]), b = to_float(bias[c]);
    T* out = y + p * s.size;
    for (int64_t j = threadIdx.x; j < s.size; j += blockDim.x)
      out[j] = from_float<T>(__fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(to_float(plane[j]), m), inv), g), b));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    mean_variance_norm_kernel(AxisGroups a, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ double scratch[32];
  for (int64_t g = blockIdx.x; g < a.groups; g += gridDim.x) {
    const int64_t base = group_base(a, g);
    auto at = [&](int64_t j) { return base + member_offset(a, j); };
    double mean, var;
    moments(x, a.members, at, scratch, mean, var);
    const double dev = __dadd_rn(sqrt(var), 1e-9);
    for (int64_t j = threadIdx.x; j < a.members; j += blockDim.x) {
      const int64_t e = at(j);
      y[e] = from_float<T>(static_cast<float>(__dsub_rn(static_cast<double>(to_float(x[e])), mean) / dev));
    }
  }
}

unsigned group_blocks(int64_t groups, int sm_count) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(groups, 8LL * sm_count)));
}

}  // namespace

InstanceNormShape instance_norm_shape(const std::vector<int64_t>& dims, float epsilon) {
  if (dims.size() < 2)
    throw InputError("InstanceNormalization: the input must be [N, C, ...], not of rank " + std::to_string(dims.size()));
  InstanceNormShape s;
  s.channels = dims[1];
  s.planes = dims[0] * dims[1];
  s.size = 1;
  for (size_t d = 2; d < dims.size(); ++d) s.size *= dims[d];
  s.epsilon = epsilon;
  return s;
}

void instance_norm(DType t, const InstanceNormShape& s, const void* x, const void* scale, const void* bias, void* y,
                   int sm_count, cudaStream_t stream) {
  if (s.planes * s.size == 0) return;
  dispatch_float(t, "InstanceNormalization", [&](auto tag) {
    using T = decltype(tag);
    instance_norm_kernel<T><<<group_blocks(s.planes, sm_count), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<T*>(y));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void mean_variance_norm(DType t, const AxisGroups& g, const void* x, void* y, int sm_count, cudaStream_t stream) {
  if (g.groups * g.members == 0) return;
  dispatch_float(t, "MeanVarianceNormalization", [&](auto tag) {
    using T = decltype(tag);
    const unsigned blocks = group_blocks(g.groups, sm_count);
    mean_variance_norm_kernel<T><<<blocks, kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
