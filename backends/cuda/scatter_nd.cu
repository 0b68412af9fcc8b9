#include "backends/cuda/scatter_nd.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "backends/cuda/scatter_combine.cuh"

namespace amp::cuda {
namespace {

// The slot (in slices) tuple t names, or -1 when an index is outside its axis.
__device__ __forceinline__ int64_t slot_of(const ScatterNDShape& s, const int64_t* __restrict__ indices, int64_t t) {
  int64_t slot = 0;
  for (int j = 0; j < s.k; ++j) {
    int64_t i = indices[t * s.k + j];
    if (i < 0) i += s.dims[j];
    if (i < 0 || i >= s.dims[j]) return -1;
    slot += i * s.strides[j];
  }
  return slot;
}

// winner[slot] = the last tuple naming it (winner starts at -1).
__global__ void claim_kernel(ScatterNDShape s, const int64_t* __restrict__ indices, int* __restrict__ winner) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < s.tuples;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t slot = slot_of(s, indices, t);
    if (slot >= 0) atomicMax(winner + slot, static_cast<int>(t));
  }
}

template <class E>
__global__ void write_kernel(ScatterNDShape s, const int64_t* __restrict__ indices, const int* __restrict__ winner,
                             const E* __restrict__ updates, E* __restrict__ out) {
  const int64_t n = s.tuples * s.slice;
  for (int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = x / s.slice, e = x % s.slice;
    const int64_t slot = slot_of(s, indices, t);
    if (slot >= 0 && winner[slot] == static_cast<int>(t)) out[slot * s.slice + e] = updates[x];
  }
}

// A thread per slice element applies the tuples in order.
template <class T>
__global__ void ordered_kernel(ScatterNDShape s, const int64_t* __restrict__ indices, const T* __restrict__ updates,
                               T* __restrict__ out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < s.slice;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int64_t t = 0; t < s.tuples; ++t) {
      const int64_t slot = slot_of(s, indices, t);
      if (slot < 0) continue;
      T& d = out[slot * s.slice + e];
      d = scatter_combine(d, updates[t * s.slice + e], s.reduction);
    }
  }
}

template <class F>
void dispatch_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw InputError("ScatterND cannot move elements of " + std::to_string(bytes) + " bytes");
  }
}

}  // namespace

size_t scatter_nd_workspace(const ScatterNDShape& s) {
  return s.reduction == 0 && s.tuples > 0 ? static_cast<size_t>(s.slots) * sizeof(int) : 0;
}

void scatter_nd(const ScatterNDShape& s, const void* data, const int64_t* indices, const void* updates, void* out,
                void* workspace, int sm_count, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(s.slots * s.slice) * s.elem_bytes;
  if (bytes == 0) return;
  if (out != data) AMP_CUDA_CHECK(cudaMemcpyAsync(out, data, bytes, cudaMemcpyDeviceToDevice, stream));
  if (s.tuples == 0 || s.slice == 0) return;
  if (s.reduction == 0) {
    int* winner = static_cast<int*>(workspace);
    AMP_CUDA_CHECK(cudaMemsetAsync(winner, 0xff, static_cast<size_t>(s.slots) * sizeof(int), stream));  // -1
    claim_kernel<<<grid_stride_blocks(s.tuples, sm_count), 256, 0, stream>>>(s, indices, winner);
    AMP_CUDA_CHECK(cudaGetLastError());
    dispatch_bytes(s.elem_bytes, [&](auto tag) {
      using E = decltype(tag);
      write_kernel<E><<<grid_stride_blocks(s.tuples * s.slice, sm_count), 256, 0, stream>>>(
          s, indices, winner, static_cast<const E*>(updates), static_cast<E*>(out));
    });
  } else {
    dispatch_scatter_type(s.type, "ScatterND", [&](auto tag) {
      using T = decltype(tag);
      ordered_kernel<T><<<grid_stride_blocks(s.slice, sm_count), 256, 0, stream>>>(s, indices, static_cast<const T*>(updates),
                                                                                  static_cast<T*>(out));
    });
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
