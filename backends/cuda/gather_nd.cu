// GatherND on the device (gather_nd.cuh).
#include "backends/cuda/gather_nd.cuh"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class E>
__global__ void __launch_bounds__(256) gather_nd_kernel(GatherNDShape s, const E* __restrict__ data,
                                                        const int64_t* __restrict__ indices, E* __restrict__ out) {
  const int64_t n = s.batches * s.tuples * s.slice;
  for (int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = x % s.slice, bt = x / s.slice;  // bt = batch * tuples + tuple
    int64_t at = bt / s.tuples * s.batch_stride + e;
    bool inside = true;
    for (int j = 0; j < s.k; ++j) {
      int64_t i = indices[bt * s.k + j];
      if (i < 0) i += s.dims[j];
      inside = inside && i >= 0 && i < s.dims[j];
      at += i * s.strides[j];
    }
    out[x] = inside ? data[at] : E{};
  }
}

}  // namespace

GatherNDShape gather_nd_shape(const std::vector<int64_t>& data, const std::vector<int64_t>& indices, int64_t batch_dims,
                              DType type, DType index_type) {
  const int64_t r = static_cast<int64_t>(data.size()), ir = static_cast<int64_t>(indices.size());
  if (index_type != DType::kInt64)
    throw InputError("GatherND indices must be int64, not " + std::string(dtype_name(index_type)));
  if (batch_dims < 0 || batch_dims >= std::min(r, ir))
    throw InputError("GatherND batch_dims " + std::to_string(batch_dims) + " must be below the data's and the indices' ranks");
  const size_t b = static_cast<size_t>(batch_dims);
  const int64_t k = indices.back();
  if (k < 1 || k > r - batch_dims)
    throw InputError("GatherND index tuples of " + std::to_string(k) + " do not fit data of rank " + std::to_string(r) +
                     " after " + std::to_string(batch_dims) + " batch dims");
  if (k > kMaxGatherNDIndex)
    throw InputError("GatherND index tuples of " + std::to_string(k) + " are not supported on the GPU (at most " +
                     std::to_string(kMaxGatherNDIndex) + ")");
  GatherNDShape s;
  s.k = static_cast<int>(k);
  s.elem_bytes = dtype_size(type);
  for (size_t d = 0; d < b; ++d) {
    if (data[d] != indices[d]) throw InputError("GatherND batch dims of the data and the indices differ");
    s.batches *= data[d];
  }
  int64_t stride = 1;
  for (size_t d = data.size(); d-- > b;) {
    if (d >= b + static_cast<size_t>(k)) s.slice *= data[d];
    else {
      s.dims[d - b] = data[d];
      s.strides[d - b] = stride;
    }
    stride *= data[d];
  }
  s.batch_stride = stride;
  s.tuples = 1;
  for (size_t d = b; d + 1 < indices.size(); ++d) s.tuples *= indices[d];
  return s;
}

void gather_nd(const GatherNDShape& s, const void* data, const int64_t* indices, void* out, int sm_count,
               cudaStream_t stream) {
  const int64_t n = s.batches * s.tuples * s.slice;
  if (n == 0) return;
  auto go = [&](auto etag) {
    using E = decltype(etag);
    gather_nd_kernel<E><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, static_cast<const E*>(data), indices,
                                                                           static_cast<E*>(out));
  };
  switch (s.elem_bytes) {
    case 1: go(uint8_t{}); break;
    case 2: go(uint16_t{}); break;
    case 4: go(uint32_t{}); break;
    case 8: go(uint64_t{}); break;
    default: throw InputError("GatherND cannot move elements of " + std::to_string(s.elem_bytes) + " bytes");
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
