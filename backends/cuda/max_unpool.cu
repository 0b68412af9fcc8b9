// MaxUnpool on the device (max_unpool.cuh): two grid-stride passes, a thread per X element (the
// claims) and then a thread per output element (the writes).
#include "backends/cuda/max_unpool.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

// The output element index `at` names, or -1 when it names none.
__device__ __forceinline__ int64_t place(const MaxUnpoolShape& s, int64_t at) {
  int64_t total = 1;
  for (int d = 0; d < s.rank; ++d) total *= s.unpooled[d];
  if (at < 0 || at >= total) return -1;
  if (!s.placed) return at;
  int64_t to = 0, stride = 1;
  for (int d = s.rank; d-- > 0;) {
    const int64_t c = at % s.unpooled[d];
    at /= s.unpooled[d];
    if (c >= s.out[d]) return -1;
    to += c * stride;
    stride *= s.out[d];
  }
  return to;
}

// claims[e]: 1 + the highest X position written to output element e, 0 for none.
__global__ void __launch_bounds__(kThreads)
    claim_kernel(MaxUnpoolShape s, const int64_t* __restrict__ indices, unsigned long long* __restrict__ claims) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < s.inputs;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t to = place(s, indices[k]);
    if (to >= 0) atomicMax(claims + to, static_cast<unsigned long long>(k + 1));
  }
}

template <class E>
__global__ void __launch_bounds__(kThreads)
    write_kernel(MaxUnpoolShape s, const E* __restrict__ x, const unsigned long long* __restrict__ claims,
                 E* __restrict__ y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < s.outputs;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long c = claims[e];
    y[e] = c ? x[c - 1] : E(0);
  }
}

}  // namespace

MaxUnpoolShape max_unpool_shape(DType t, const std::vector<int64_t>& x, const std::vector<int64_t>& indices,
                                const std::vector<int64_t>& out, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& strides, const std::vector<int64_t>& pads) {
  if (t != DType::kFloat && t != DType::kFloat16 && t != DType::kBFloat16 && t != DType::kDouble)
    throw InputError("MaxUnpool on cuda takes float, float16, bfloat16 or double, not " + std::string(dtype_name(t)));
  if (x.size() < 3 || x.size() > static_cast<size_t>(kMaxUnpoolRank))
    throw InputError("MaxUnpool takes X of rank 3 to " + std::to_string(kMaxUnpoolRank) + ", not " +
                     std::to_string(x.size()));
  if (indices != x) throw InputError("MaxUnpool's indices must have X's shape");
  if (out.size() != x.size()) throw InputError("MaxUnpool's output must have X's rank");
  MaxUnpoolShape s;
  s.rank = static_cast<int>(x.size());
  s.elem_bytes = dtype_size(t);
  const size_t spatial = x.size() - 2;
  s.inputs = s.outputs = 1;
  for (size_t d = 0; d < x.size(); ++d) {
    int64_t u = x[d];
    if (d >= 2 && d - 2 < kernel.size()) {
      const size_t k = d - 2;
      const int64_t stride = strides.empty() ? 1 : strides[k], pad = pads.empty() ? 0 : pads[k] + pads[k + spatial];
      u = (x[d] - 1) * stride - pad + kernel[k];
    }
    s.unpooled[d] = u;
    s.out[d] = out[d];
    s.placed = s.placed || u != out[d];
    s.inputs *= x[d];
    s.outputs *= out[d];
  }
  return s;
}

size_t max_unpool_workspace(const MaxUnpoolShape& s) {
  return static_cast<size_t>(s.outputs) * sizeof(unsigned long long);
}

void max_unpool(const MaxUnpoolShape& s, const void* x, const int64_t* indices, void* y, void* workspace,
                int sm_count, cudaStream_t stream) {
  if (s.outputs == 0) return;
  auto* claims = static_cast<unsigned long long*>(workspace);
  AMP_CUDA_CHECK(cudaMemsetAsync(claims, 0, max_unpool_workspace(s), stream));
  if (s.inputs > 0)
    claim_kernel<<<grid_stride_blocks(s.inputs, sm_count), kThreads, 0, stream>>>(s, indices, claims);
  const unsigned blocks = grid_stride_blocks(s.outputs, sm_count);
  switch (s.elem_bytes) {
    case 2:
      write_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(s, static_cast<const uint16_t*>(x), claims,
                                                              static_cast<uint16_t*>(y));
      break;
    case 4:
      write_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(s, static_cast<const uint32_t*>(x), claims,
                                                              static_cast<uint32_t*>(y));
      break;
    default:
      write_kernel<uint64_t><<<blocks, kThreads, 0, stream>>>(s, static_cast<const uint64_t*>(x), claims,
                                                              static_cast<uint64_t*>(y));
      break;
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
