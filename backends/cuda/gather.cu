// Gather and scatter-add, the embedding lookup and its gradient. The forward copies rows of
// `inner` elements, a thread per element so a row is one coalesced read. The backward adds each
// dY row into the row its index names; repeated tokens hit the same row, so the adds are fp32
// atomics into a zeroed fp32 scratch (fp16 atomics would round after every add: a frequent
// token's gradient summed over 8k positions would lose most of its bits), then one pass rounds
// into the gradient's type. The order of fp32 atomics varies, so the last bits can vary between
// runs, as in PyTorch's default embedding backward.
// Negative indices count from the end (ONNX); an index outside the axis cannot be reported from a
// kernel, so its row reads as zeros in the forward and is dropped in the backward.
#include "backends/cuda/gather.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

template <class I>
__device__ __forceinline__ int64_t resolve(const I* indices, int64_t j, int64_t axis) {
  int64_t k = static_cast<int64_t>(indices[j]);
  if (k < 0) k += axis;
  return (k < 0 || k >= axis) ? -1 : k;
}

template <class E, class I>
__global__ void gather_kernel(const E* __restrict__ data, const I* __restrict__ indices, E* __restrict__ out,
                              int64_t outer, int64_t axis, int64_t inner, int64_t m) {
  const int64_t n = outer * m * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % inner, j = (t / inner) % m, o = t / (inner * m);
    const int64_t k = resolve(indices, j, axis);
    out[t] = k < 0 ? E{} : data[(o * axis + k) * inner + i];
  }
}

template <class T, class I>
__global__ void scatter_add_kernel(const T* __restrict__ dy, const I* __restrict__ indices, float* __restrict__ acc,
                                   int64_t outer, int64_t axis, int64_t inner, int64_t m) {
  const int64_t n = outer * m * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % inner, j = (t / inner) % m, o = t / (inner * m);
    const int64_t k = resolve(indices, j, axis);
    if (k >= 0) atomicAdd(acc + (o * axis + k) * inner + i, to_float(dy[t]));
  }
}

template <class T>
__global__ void round_into(const float* __restrict__ acc, T* __restrict__ out, int64_t n) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[t] = from_float<T>(acc[t]);
}

template <class F>
void dispatch_index(DType t, F&& f) {
  if (t == DType::kInt64) f(int64_t{});
  else if (t == DType::kInt32) f(int32_t{});
  else throw InputError("indices must be int32 or int64, not " + std::string(dtype_name(t)));
}

}  // namespace

void gather(const GatherShape& s, const void* data, const void* indices, void* out, int sm_count, cudaStream_t stream) {
  const int64_t n = s.outer * s.m * s.inner;
  if (n == 0) return;
  dispatch_index(s.index_type, [&](auto itag) {
    using I = decltype(itag);
    auto go = [&](auto etag) {
      using E = decltype(etag);
      gather_kernel<E, I><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(
          static_cast<const E*>(data), static_cast<const I*>(indices), static_cast<E*>(out), s.outer, s.axis, s.inner, s.m);
    };
    switch (s.elem_bytes) {
      case 1: go(uint8_t{}); break;
      case 2: go(uint16_t{}); break;
      case 4: go(uint32_t{}); break;
      case 8: go(uint64_t{}); break;
      default: throw InputError("Gather cannot move elements of " + std::to_string(s.elem_bytes) + " bytes");
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

size_t scatter_add_workspace(const GatherShape& s) {
  return static_cast<size_t>(s.outer * s.axis * s.inner) * sizeof(float);
}

void scatter_add(const GatherShape& s, const void* dy, const void* indices, void* ddata, void* workspace, int sm_count,
                 cudaStream_t stream) {
  const int64_t total = s.outer * s.axis * s.inner, n = s.outer * s.m * s.inner;
  if (total == 0) return;
  float* acc = static_cast<float*>(workspace);
  AMP_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<size_t>(total) * sizeof(float), stream));
  dispatch_float(s.type, "GatherGrad", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(s.index_type, [&](auto itag) {
      using I = decltype(itag);
      if (n > 0)
        scatter_add_kernel<T, I><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(
            static_cast<const T*>(dy), static_cast<const I*>(indices), acc, s.outer, s.axis, s.inner, s.m);
    });
    round_into<T><<<grid_stride_blocks(total, sm_count), 256, 0, stream>>>(acc, static_cast<T*>(ddata), total);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
