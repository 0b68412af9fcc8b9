// One copy kernel for all data movement: Transpose, Slice, Split, Concat, Expand, SliceGrad.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace amp::cuda {

// dst[base_dst + sum c_d * dst_stride_d] = src[base_src + sum c_d * src_stride_d] for every
// coordinate c of `dims` (element strides; a src stride of 0 repeats, as Expand does). Elements
// are elem_bytes wide (1, 2, 4 or 8): the copy never looks at the type.
struct StridedCopy {
  std::vector<int64_t> dims, src_strides, dst_strides;
  int64_t src_base = 0, dst_base = 0;
  size_t elem_bytes = 4;
};

// Merges dims the copy walks contiguously in both tensors, so a transpose of [B,T,H,D] to
// [B,H,T,D] becomes a copy of D-element rows. InputError beyond 8 dims after merging.
StridedCopy simplify(StridedCopy c);
void strided_copy(const StridedCopy& c, const void* src, void* dst, int sm_count, cudaStream_t stream);

// Row-major element strides of dims.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

}  // namespace amp::cuda
