// One copy kernel for all data movement: Transpose, Slice, Split, Concat, Expand, SliceGrad; and its
// multi-copy form, several copies in one launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace amp::cuda {

// dst[base_dst + sum c_d * dst_stride_d] = src[base_src + sum c_d * src_stride_d] for every
// coordinate c of `dims` (element strides; a src stride of 0 repeats, as Expand does). Elements
// are elem_bytes wide (1, 2, 4 or 8): the copy never looks at the type. Where the innermost dim
// is contiguous on both sides and the offsets and pointers allow, the kernel moves up to 16 bytes
// (several elements) at a time.
struct StridedCopy {
  std::vector<int64_t> dims, src_strides, dst_strides;
  int64_t src_base = 0, dst_base = 0;
  size_t elem_bytes = 4;
};

// The most dims a copy may have after simplify().
constexpr int kMaxCopyDims = 8;

// Merges dims the copy walks contiguously in both tensors, so a transpose of [B,T,H,D] to
// [B,H,T,D] becomes a copy of D-element rows. InputError beyond kMaxCopyDims dims after merging.
StridedCopy simplify(StridedCopy c);
void strided_copy(const StridedCopy& c, const void* src, void* dst, int sm_count, cudaStream_t stream);
// copies[k] from src[k] to dst[k], in one launch per 16 copies (one copy: strided_copy's launch,
// with 224 bytes of arguments rather than a task list's 3,976). The copies must be independent:
// none writes what another reads, and two that write one buffer write disjoint elements. Element
// sizes may differ.
void strided_copies(const std::vector<StridedCopy>& copies, const std::vector<const void*>& src,
                    const std::vector<void*>& dst, int sm_count, cudaStream_t stream);

// Whether strided_copy moves c (simplified) through shared-memory tiles, and the dim it reads
// contiguously if so: the destination's innermost dim (at least 8 long) is strided in the source
// and another dim (at least 8 long) of source stride 1 is strided in the destination — a
// transpose such as NCHW <-> NHWC, which the element-at-a-time walk reads or writes one element
// per 32-byte sector; no stride zero or negative; elements of 1, 2, 4 or 8 bytes.
std::optional<size_t> transposed_dim(const StridedCopy& c);

// Row-major element strides of dims.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

}  // namespace amp::cuda
