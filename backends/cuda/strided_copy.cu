// Strided copies. Every reshuffle of elements in the graph (Transpose, Slice, Split, Concat,
// Expand, and the zeros-plus-window of SliceGrad) is a walk over the destination's coordinates
// with a stride per dim on each side, so one kernel serves them all. Dims that are contiguous in
// both tensors are merged first (a [B,T,H,D] -> [B,H,T,D] transpose moves D-element rows), and
// the index arithmetic is 32-bit when the tensors allow it: 64-bit division is a long
// software sequence on the GPU.
//
// Several independent copies can share one launch (strided_copies): the plan batches the copies
// that run back to back, e.g. the q, k and v transposes of an attention layer, which after
// composition (copy_fusion.h) all read the qkv product's output. The copies travel as a task
// list in the kernel's arguments, as the multi-tensor launches' do: 16 tasks of 248 bytes fit
// the 4 KB of kernel parameters every architecture takes, and a captured CUDA Graph keeps them as
// values. Each thread walks every task in turn over the whole grid. A single copy that moves one
// dim contiguous in the source to the innermost of the destination (NCHW <-> NHWC) goes through
// shared-memory tiles instead (transpose_tiles).
#include "backends/cuda/strided_copy.cuh"

#include <algorithm>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kMaxDims = kMaxCopyDims;
constexpr int kCopiesPerLaunch = 16;

struct CopyArgs {
  int rank;
  long long dims[kMaxDims], src[kMaxDims], dst[kMaxDims];
  long long src_base, dst_base, n;
};

// One task of a multi-copy launch.
struct CopyTask {
  CopyArgs args;
  const void* src;
  void* dst;
  int elem_bytes;
};

struct CopyTaskList {
  CopyTask task[kCopiesPerLaunch];
  int count;
};
static_assert(sizeof(CopyTaskList) <= 4096, "a task list must fit the kernel parameters of every architecture");

// This thread's share of one copy: elements first, first + step, ... of the walk.
template <class E, class I>
__device__ __forceinline__ void copy_elements(const CopyArgs& a, const E* __restrict__ src, E* __restrict__ dst,
                                              I first, I step) {
  for (I i = first; i < static_cast<I>(a.n); i += step) {
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

template <class E, class I>
__global__ void strided_copy_kernel(CopyArgs a, const E* __restrict__ src, E* __restrict__ dst) {
  copy_elements<E, I>(a, src, dst, static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x,
                      static_cast<I>(gridDim.x) * blockDim.x);
}

template <class E, class I>
__device__ __forceinline__ void copy_task(const CopyTask& c, I first, I step) {
  copy_elements<E, I>(c.args, static_cast<const E*>(c.src), static_cast<E*>(c.dst), first, step);
}

// __grid_constant__: the tasks are read where the parameters are, though referenced, never copied
// to each thread's local memory (4 KB per thread).
template <class I>
__global__ void strided_copies_kernel(const __grid_constant__ CopyTaskList list) {
  const I first = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x, step = static_cast<I>(gridDim.x) * blockDim.x;
  for (int t = 0; t < list.count; ++t) {
    switch (list.task[t].elem_bytes) {  // the same for every thread: no divergence
      case 1: copy_task<uint8_t>(list.task[t], first, step); break;
      case 2: copy_task<uint16_t>(list.task[t], first, step); break;
      case 4: copy_task<uint32_t>(list.task[t], first, step); break;
      case 8: copy_task<uint64_t>(list.task[t], first, step); break;
      default: copy_task<uint4>(list.task[t], first, step); break;
    }
  }
}

int64_t copy_blocks(int64_t n, int sm_count) { return std::min<int64_t>((n + 255) / 256, 8LL * sm_count); }

// A transpose through shared memory (transposed_dims): the walk's innermost dim `last` is
// contiguous in the destination only and dim `p` in the source only, so the element-at-a-time
// walk reads (or writes) one element per 32-byte sector: NCHW <-> NHWC of a 16-bit activation
// moved a sixteenth of its sectors' bytes. A block takes 32 x 32 tiles of (p, last) — reading
// along p, writing along last, both coalesced — over every coordinate of the other dims.
constexpr int kTile = 32, kTileRows = 8;

struct TransposeArgs {
  CopyArgs copy;
  int p = 0;              // the dim contiguous in the source; the destination's is rank - 1
  long long tiles_i = 0, tiles_j = 0, tiles = 0;
};

template <class E, class I>
__global__ void __launch_bounds__(kTile * kTileRows) transpose_tiles(TransposeArgs t, const E* __restrict__ src,
                                                                     E* __restrict__ dst) {
  __shared__ E tile[kTile][kTile + 1];  // + 1: a column of the tile spans every bank
  const CopyArgs& a = t.copy;
  const int last = a.rank - 1, p = t.p;
  const I ni = static_cast<I>(a.dims[p]), nj = static_cast<I>(a.dims[last]);
  for (I k = blockIdx.x; k < static_cast<I>(t.tiles); k += gridDim.x) {
    I rest = k;
    const I tj = rest % static_cast<I>(t.tiles_j);
    rest /= static_cast<I>(t.tiles_j);
    const I ti = rest % static_cast<I>(t.tiles_i);
    rest /= static_cast<I>(t.tiles_i);
    I s = static_cast<I>(a.src_base), d = static_cast<I>(a.dst_base);
    for (int q = last - 1; q >= 0; --q) {  // the other dims' coordinate: rest
      if (q == p) continue;
      const I size = static_cast<I>(a.dims[q]);
      const I c = rest % size;
      rest /= size;
      s += c * static_cast<I>(a.src[q]);
      d += c * static_cast<I>(a.dst[q]);
    }
    const I i0 = ti * kTile, j0 = tj * kTile;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // element (i0 + x, j0 + r): along p
      const I i = i0 + threadIdx.x, j = j0 + r;
      if (i < ni && j < nj) tile[r][threadIdx.x] = src[s + i + j * static_cast<I>(a.src[last])];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // element (i0 + r, j0 + x): along last
      const I i = i0 + r, j = j0 + threadIdx.x;
      if (i < ni && j < nj) dst[d + i * static_cast<I>(a.dst[p]) + j] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

template <class E>
void launch_transpose(const TransposeArgs& t, const void* src, void* dst, int sm_count, cudaStream_t stream, bool wide) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(t.tiles, 8LL * sm_count));
  const dim3 block(kTile, kTileRows);
  if (wide)
    transpose_tiles<E, long long><<<blocks, block, 0, stream>>>(t, static_cast<const E*>(src), static_cast<E*>(dst));
  else
    transpose_tiles<E, unsigned><<<blocks, block, 0, stream>>>(t, static_cast<const E*>(src), static_cast<E*>(dst));
}

template <class E>
void launch(const CopyArgs& a, const void* src, void* dst, int sm_count, cudaStream_t stream, bool wide) {
  const int64_t blocks = copy_blocks(a.n, sm_count);
  if (wide)
    strided_copy_kernel<E, long long><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a, static_cast<const E*>(src),
                                                                                         static_cast<E*>(dst));
  else
    strided_copy_kernel<E, unsigned><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a, static_cast<const E*>(src),
                                                                                        static_cast<E*>(dst));
}

// c with up to 16 bytes an element where its innermost dim is contiguous on both sides: f
// neighbouring elements copied as one (a [B,T,H,D] -> [B,H,T,D] transpose of 64-element bf16 rows
// moves 16 bytes a thread, not 2: on an H100 (2026-11-27) GPT-2-small's head transposes, element
// by element, took 3.8 ms of a 57 ms step). Only where every offset and both pointers keep the
// wider element's alignment; anything else is copied as it is.
StridedCopy widened(const StridedCopy& c, const void* src, const void* dst) {
  const bool power_of_two = c.elem_bytes == 1 || c.elem_bytes == 2 || c.elem_bytes == 4 || c.elem_bytes == 8;
  if (!power_of_two || c.dims.empty() || c.src_strides.back() != 1 || c.dst_strides.back() != 1) return c;
  for (size_t f = 16 / c.elem_bytes; f > 1; f /= 2) {
    const auto fi = static_cast<int64_t>(f);
    const size_t bytes = c.elem_bytes * f;
    bool ok = c.dims.back() % fi == 0 && c.src_base % fi == 0 && c.dst_base % fi == 0 &&
              reinterpret_cast<uintptr_t>(src) % bytes == 0 && reinterpret_cast<uintptr_t>(dst) % bytes == 0;
    for (size_t d = 0; ok && d + 1 < c.dims.size(); ++d) ok = c.src_strides[d] % fi == 0 && c.dst_strides[d] % fi == 0;
    if (!ok) continue;
    StridedCopy w = c;
    w.dims.back() /= fi;
    for (size_t d = 0; d + 1 < w.dims.size(); ++d) {
      w.src_strides[d] /= fi;
      w.dst_strides[d] /= fi;
    }
    w.src_base /= fi;
    w.dst_base /= fi;
    w.elem_bytes = bytes;
    return w;
  }
  return c;
}

// The kernel's arguments for c; wide: whether an index or offset reaches 2^31 (the 64-bit kernel).
// InputError for more than kMaxDims dims (simplify() first) or an element size not 1, 2, 4, 8 or 16.
CopyArgs copy_args(const StridedCopy& c, bool* wide) {
  if (c.dims.size() > static_cast<size_t>(kMaxDims))  // CopyArgs holds kMaxDims
    throw InputError("a copy over more than " + std::to_string(kMaxDims) + " non-mergeable dims is not supported");
  if (c.elem_bytes != 1 && c.elem_bytes != 2 && c.elem_bytes != 4 && c.elem_bytes != 8 && c.elem_bytes != 16)
    throw InputError("cannot copy elements of " + std::to_string(c.elem_bytes) + " bytes");
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
  a.src_base = c.src_base;
  a.dst_base = c.dst_base;
  *wide = std::max<int64_t>({a.n, src_extent, dst_extent}) >= (int64_t{1} << 31);
  return a;
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

std::optional<size_t> transposed_dim(const StridedCopy& c) {
  const size_t rank = c.dims.size();
  if (rank < 2 || c.dst_strides.back() != 1 || c.src_strides.back() == 1 || c.dims.back() < 8) return std::nullopt;
  if (c.elem_bytes != 1 && c.elem_bytes != 2 && c.elem_bytes != 4 && c.elem_bytes != 8) return std::nullopt;
  for (size_t d = 0; d < rank; ++d)
    if (c.src_strides[d] <= 0 || c.dst_strides[d] <= 0) return std::nullopt;  // Expand's repeats, Slice's reversals
  for (size_t p = 0; p + 1 < rank; ++p)
    if (c.src_strides[p] == 1 && c.dims[p] >= 8) return p;
  return std::nullopt;
}

void strided_copy(const StridedCopy& copy, const void* src, void* dst, int sm_count, cudaStream_t stream) {
  bool wide = false;
  if (const std::optional<size_t> p = transposed_dim(copy)) {
    TransposeArgs t;
    t.copy = copy_args(copy, &wide);
    if (t.copy.n == 0) return;
    t.p = static_cast<int>(*p);
    t.tiles_i = (copy.dims[*p] + kTile - 1) / kTile;
    t.tiles_j = (copy.dims.back() + kTile - 1) / kTile;
    t.tiles = t.tiles_i * t.tiles_j * (t.copy.n / (copy.dims[*p] * copy.dims.back()));
    switch (copy.elem_bytes) {
      case 1: launch_transpose<uint8_t>(t, src, dst, sm_count, stream, wide); break;
      case 2: launch_transpose<uint16_t>(t, src, dst, sm_count, stream, wide); break;
      case 4: launch_transpose<uint32_t>(t, src, dst, sm_count, stream, wide); break;
      default: launch_transpose<uint64_t>(t, src, dst, sm_count, stream, wide); break;
    }
    AMP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const StridedCopy c = widened(copy, src, dst);  // an element size copy_args refuses stays as it is
  const CopyArgs a = copy_args(c, &wide);
  if (a.n == 0) return;
  switch (c.elem_bytes) {
    case 1: launch<uint8_t>(a, src, dst, sm_count, stream, wide); break;
    case 2: launch<uint16_t>(a, src, dst, sm_count, stream, wide); break;
    case 4: launch<uint32_t>(a, src, dst, sm_count, stream, wide); break;
    case 8: launch<uint64_t>(a, src, dst, sm_count, stream, wide); break;
    case 16: launch<uint4>(a, src, dst, sm_count, stream, wide); break;
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

void strided_copies(const std::vector<StridedCopy>& copies, const std::vector<const void*>& src,
                    const std::vector<void*>& dst, int sm_count, cudaStream_t stream) {
  if (copies.size() == 1) return strided_copy(copies[0], src[0], dst[0], sm_count, stream);
  // Transposes through tiles, each a launch of its own; the rest batched (the copies are
  // independent, so the order does not matter).
  std::vector<size_t> batched;
  for (size_t k = 0; k < copies.size(); ++k) {
    if (transposed_dim(copies[k])) strided_copy(copies[k], src[k], dst[k], sm_count, stream);
    else batched.push_back(k);
  }
  for (size_t first = 0; first < batched.size(); first += kCopiesPerLaunch) {
    CopyTaskList list{};
    bool wide = false;
    int64_t largest = 0;
    for (size_t at = first; at < std::min(batched.size(), first + kCopiesPerLaunch); ++at) {
      const size_t k = batched[at];
      bool task_wide = false;
      const StridedCopy c = widened(copies[k], src[k], dst[k]);
      const CopyArgs a = copy_args(c, &task_wide);
      if (a.n == 0) continue;
      wide = wide || task_wide;
      largest = std::max<int64_t>(largest, a.n);
      list.task[list.count++] = CopyTask{a, src[k], dst[k], static_cast<int>(c.elem_bytes)};
    }
    if (list.count == 0) continue;
    const unsigned blocks = static_cast<unsigned>(copy_blocks(largest, sm_count));
    if (wide) strided_copies_kernel<long long><<<blocks, 256, 0, stream>>>(list);
    else strided_copies_kernel<unsigned><<<blocks, 256, 0, stream>>>(list);
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
