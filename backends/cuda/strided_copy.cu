// Strided copies. Every reshuffle of elements in the graph (Transpose, Slice, Split, Concat,
// Expand, and the zeros-plus-window of SliceGrad) is a walk over the destination's coordinates
// with a stride per dim on each side, so one kernel serves them all. Dims that are contiguous in
// both tensors are merged first (a [B,T,H,D] -> [B,H,T,D] transpose moves D-element rows), and
// the index arithmetic is 32-bit when the tensors allow it: 64-bit division is a long
// software sequence on the GPU.
#include "backends/cuda/strided_copy.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kMaxDims = 8;

struct CopyArgs {
  int rank;
  long long dims[kMaxDims], src[kMaxDims], dst[kMaxDims];
  long long src_base, dst_base, n;
};

template <class E, class I>
__global__ void strided_copy_kernel(CopyArgs a, const E* __restrict__ src, E* __restrict__ dst) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(a.n); i += step) {
    I rest = i, s = static_cast<I>(a.src_base), d = static_cast<I>(a.dst_base);
    for (int k = a.rank - 1; k >= 0; --k) {
      const I size = static_cast<I>(a.dims[k]);
      const I c = rest % size;
      rest /= size;
      s += c * static_cast<I>(a.src[k]);
      d += c * static_cast<I>(a.dst[k]);
    }
    dst[d] = src[s];
  }
}

template <class E>
void launch(const CopyArgs& a, const void* src, void* dst, int sm_count, cudaStream_t stream, bool wide) {
  const int64_t blocks = std::min<int64_t>((a.n + 255) / 256, 8LL * sm_count);
  if (wide)
    strided_copy_kernel<E, long long><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a, static_cast<const E*>(src),
                                                                                         static_cast<E*>(dst));
  else
    strided_copy_kernel<E, unsigned><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a, static_cast<const E*>(src),
                                                                                        static_cast<E*>(dst));
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

StridedCopy simplify(StridedCopy c) {
  StridedCopy out = c;
  out.dims.clear();
  out.src_strides.clear();
  out.dst_strides.clear();
  for (size_t d = 0; d < c.dims.size(); ++d) {
    if (c.dims[d] == 1) continue;  // contributes nothing to any offset
    if (!out.dims.empty() && out.src_strides.back() == c.src_strides[d] * c.dims[d] &&
        out.dst_strides.back() == c.dst_strides[d] * c.dims[d]) {
      // The previous dim steps over exactly this one in both tensors: one longer dim.
      out.dims.back() *= c.dims[d];
      out.src_strides.back() = c.src_strides[d];
      out.dst_strides.back() = c.dst_strides[d];
      continue;
    }
    out.dims.push_back(c.dims[d]);
    out.src_strides.push_back(c.src_strides[d]);
    out.dst_strides.push_back(c.dst_strides[d]);
  }
  if (out.dims.size() > static_cast<size_t>(kMaxDims))
    throw InputError("a copy over more than " + std::to_string(kMaxDims) + " non-mergeable dims is not supported");
  return out;
}

void strided_copy(const StridedCopy& c, const void* src, void* dst, int sm_count, cudaStream_t stream) {
  if (c.dims.size() > static_cast<size_t>(kMaxDims))  // CopyArgs holds kMaxDims: simplify() first
    throw InputError("a copy over more than " + std::to_string(kMaxDims) + " non-mergeable dims is not supported");
  CopyArgs a{};
  a.rank = static_cast<int>(c.dims.size());
  a.n = 1;
  // One past the largest offset either side reaches. A negative stride (Slice with a negative
  // step) walks down from the base, so it adds nothing: the base itself is the largest then.
  int64_t src_extent = c.src_base + 1, dst_extent = c.dst_base + 1;
  for (int k = 0; k < a.rank; ++k) {
    a.dims[k] = c.dims[k];
    a.src[k] = c.src_strides[k];
    a.dst[k] = c.dst_strides[k];
    a.n *= c.dims[k];
    src_extent += (c.dims[k] - 1) * std::max<int64_t>(c.src_strides[k], 0);
    dst_extent += (c.dims[k] - 1) * std::max<int64_t>(c.dst_strides[k], 0);
  }
  if (a.n == 0) return;
  a.src_base = c.src_base;
  a.dst_base = c.dst_base;
  const bool wide = std::max<int64_t>({a.n, src_extent, dst_extent}) >= (int64_t{1} << 31);
  switch (c.elem_bytes) {
    case 1: launch<uint8_t>(a, src, dst, sm_count, stream, wide); break;
    case 2: launch<uint16_t>(a, src, dst, sm_count, stream, wide); break;
    case 4: launch<uint32_t>(a, src, dst, sm_count, stream, wide); break;
    case 8: launch<uint64_t>(a, src, dst, sm_count, stream, wide); break;
    default: throw InputError("cannot copy elements of " + std::to_string(c.elem_bytes) + " bytes");
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
