// GatherElements and ScatterElements on the device (gather_elements.cuh): the gather a thread per
// position of indices, the scatter a thread per line of indices along the axis.
#include "backends/cuda/gather_elements.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "backends/cuda/scatter_combine.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// indices[p] along an axis of `extent`, from the back when negative; -1 outside the axis.
template <class I>
__device__ __forceinline__ int64_t element_index(const I* indices, int64_t p, int64_t extent) {
  int64_t i = static_cast<int64_t>(indices[p]);
  if (i < 0) i += extent;
  return (i < 0 || i >= extent) ? -1 : i;
}

template <class E, class I>
__global__ void __launch_bounds__(256) gather_elements_kernel(ElementsShape s, const E* __restrict__ data,
                                                              const I* __restrict__ indices, E* __restrict__ out) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < s.positions;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = element_index(indices, p, s.extent);
    int64_t at = 0, rest = p;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = rest % s.index_dims[d];
      rest /= s.index_dims[d];
      at += (d == s.axis ? i : c) * s.data_strides[d];
    }
    out[p] = i < 0 ? E{} : data[at];
  }
}

template <class T, class I>
__global__ void __launch_bounds__(256) scatter_elements_kernel(ElementsShape s, const I* __restrict__ indices,
                                                               const T* __restrict__ updates, T* __restrict__ out) {
  const int64_t steps = s.index_dims[s.axis], lines = s.positions / steps;
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // The line's first position in indices and its element in the data (axis coordinate 0), and
    // the step along the axis in indices.
    int64_t first = 0, base = 0, stride = 1, index_stride = 1, rest = l;
    for (int d = s.rank - 1; d >= 0; --d) {
      if (d == s.axis) {
        stride = index_stride;
      } else {
        const int64_t c = rest % s.index_dims[d];
        rest /= s.index_dims[d];
        first += c * index_stride;
        base += c * s.data_strides[d];
      }
      index_stride *= s.index_dims[d];
    }
    for (int64_t j = 0; j < steps; ++j) {
      const int64_t p = first + j * stride;
      const int64_t i = element_index(indices, p, s.extent);
      if (i < 0) continue;
      T& d = out[base + i * s.data_strides[s.axis]];
      d = scatter_combine(d, updates[p], s.reduction);
    }
  }
}

template <class F>
void dispatch_index(DType t, F&& f) {
  if (t == DType::kInt64) f(int64_t{});
  else if (t == DType::kInt32) f(int32_t{});
  else throw InputError("indices must be int32 or int64, not " + std::string(dtype_name(t)));
}

}  // namespace

ElementsShape elements_shape(const char* op, const std::vector<int64_t>& data, const std::vector<int64_t>& indices,
                             int64_t axis, DType type, DType index_type) {
  const int64_t rank = static_cast<int64_t>(data.size());
  if (rank == 0) throw InputError(std::string(op) + ": the data must have rank >= 1");
  if (rank > kMaxElementsRank)
    throw InputError(std::string(op) + " of rank " + std::to_string(rank) + " is not supported on the GPU (at most " +
                     std::to_string(kMaxElementsRank) + ")");
  if (axis < -rank || axis >= rank)
    throw InputError(std::string(op) + " axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  if (indices.size() != data.size())
    throw InputError(std::string(op) + " indices of rank " + std::to_string(indices.size()) +
                     " must have the data's rank " + std::to_string(rank));
  if (index_type != DType::kInt32 && index_type != DType::kInt64)
    throw InputError(std::string(op) + " indices must be int32 or int64, not " + std::string(dtype_name(index_type)));
  ElementsShape s;
  s.rank = static_cast<int>(rank);
  s.axis = static_cast<int>(axis < 0 ? axis + rank : axis);
  s.extent = data[static_cast<size_t>(s.axis)];
  s.type = type;
  s.index_type = index_type;
  s.positions = 1;
  s.data_elements = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    const size_t k = static_cast<size_t>(d);
    if (d != s.axis && indices[k] > data[k])
      throw InputError(std::string(op) + " indices exceed the data along dim " + std::to_string(d) + " (" +
                       std::to_string(indices[k]) + " > " + std::to_string(data[k]) + ")");
    s.index_dims[d] = indices[k];
    s.data_strides[d] = s.data_elements;
    s.data_elements *= data[k];
    s.positions *= indices[k];
  }
  return s;
}

void gather_elements(const ElementsShape& s, const void* data, const void* indices, void* out, int sm_count,
                     cudaStream_t stream) {
  if (s.positions == 0) return;
  dispatch_index(s.index_type, [&](auto itag) {
    using I = decltype(itag);
    auto go = [&](auto etag) {
      using E = decltype(etag);
      gather_elements_kernel<E, I><<<grid_stride_blocks(s.positions, sm_count), 256, 0, stream>>>(
          s, static_cast<const E*>(data), static_cast<const I*>(indices), static_cast<E*>(out));
    };
    switch (dtype_size(s.type)) {
      case 1: go(uint8_t{}); break;
      case 2: go(uint16_t{}); break;
      case 4: go(uint32_t{}); break;
      case 8: go(uint64_t{}); break;
      default: throw InputError("GatherElements cannot move elements of " + std::string(dtype_name(s.type)));
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void scatter_elements(const ElementsShape& s, const void* data, const void* indices, const void* updates, void* out,
                      int sm_count, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(s.data_elements) * dtype_size(s.type);
  if (bytes == 0) return;
  if (out != data) AMP_CUDA_CHECK(cudaMemcpyAsync(out, data, bytes, cudaMemcpyDeviceToDevice, stream));
  if (s.positions == 0) return;
  const int64_t lines = s.positions / s.index_dims[s.axis];
  dispatch_index(s.index_type, [&](auto itag) {
    using I = decltype(itag);
    dispatch_scatter_type(s.type, "ScatterElements", [&](auto tag) {
      using T = decltype(tag);
      scatter_elements_kernel<T, I><<<grid_stride_blocks(lines, sm_count), 256, 0, stream>>>(
          s, static_cast<const I*>(indices), static_cast<const T*>(updates), static_cast<T*>(out));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
