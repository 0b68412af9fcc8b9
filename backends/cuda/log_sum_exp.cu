// ReduceLogSumExp on the device (log_sum_exp.cuh): a block of 256 threads per output, in a
// grid-stride loop over the outputs, reads its group twice — the max, then the shifted
// exponentials' sum.
#include "backends/cuda/log_sum_exp.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads) log_sum_exp_kernel(AxisGroups a, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ float scratch[32];
  for (int64_t g = blockIdx.x; g < a.groups; g += gridDim.x) {
    const int64_t base = group_base(a, g);
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < a.members; j += blockDim.x) {
      const float v = to_float(x[base + member_offset(a, j)]);
      m = (v > m || v != v) ? v : m;
    }
    m = block_max(m, scratch);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < a.members; j += blockDim.x)
      sum = __fadd_rn(sum, expf(__fsub_rn(to_float(x[base + member_offset(a, j)]), m)));
    sum = block_sum(sum, scratch);
    if (threadIdx.x == 0) y[g] = from_float<T>(isfinite(m) ? __fadd_rn(m, logf(sum)) : m);
  }
}

}  // namespace

void reduce_log_sum_exp(DType t, const AxisGroups& g, const void* x, void* y, int sm_count, cudaStream_t stream) {
  if (g.groups == 0) return;
  dispatch_float(t, "ReduceLogSumExp", [&](auto tag) {
    using T = decltype(tag);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.groups, 8LL * sm_count));
    log_sum_exp_kernel<T><<<blocks, kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
