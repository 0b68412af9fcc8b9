// Axis reductions. Every pass views its source as [outer, r, inner] and reduces r: with inner = 1
// a block per output reads a contiguous run (row sums: softmax's backward, GlobalAveragePool);
// with inner > 1 consecutive threads take consecutive inner positions so reads stay coalesced
// (column sums: a bias gradient over [tokens, channels]). When that leaves the GPU idle — 768
// outputs each summing 8192 rows — r is cut into chunks on blockIdx.y, each writing fp32
// partials, and a second pass sums the chunks: no atomics, so results are reproducible. ReduceL1,
// ReduceL2, ReduceSumSquare and ReduceLogSum are sums whose first pass reads |x| or x^2 and whose
// last pass takes the square root or the logarithm.
// Accumulation is fp32; max/min let NaN win, as the elementwise Max/Min do.
#include "backends/cuda/reduce.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

__device__ __forceinline__ float identity_of(int kind) {
  return kind == static_cast<int>(ReduceKind::kMax)    ? -INFINITY
         : kind == static_cast<int>(ReduceKind::kMin)  ? INFINITY
         : kind == static_cast<int>(ReduceKind::kProd) ? 1.0f
                                                       : 0.0f;
}

__device__ __forceinline__ float combine(int kind, float a, float b) {
  if (kind == static_cast<int>(ReduceKind::kMax)) return (a > b || a != a) ? a : b;
  if (kind == static_cast<int>(ReduceKind::kMin)) return (a < b || a != a) ? a : b;
  if (kind == static_cast<int>(ReduceKind::kProd)) return a * b;
  return a + b;
}

// What the first pass applies to each input element (kRead*) and the last to each result (kFinish*).
enum : int { kReadAsIs = 0, kReadAbs = 1, kReadSquare = 2 };
enum : int { kFinishAsIs = 0, kFinishSqrt = 1, kFinishLog = 2 };

__device__ __forceinline__ float read_op(int read, float v) {
  return read == kReadAbs ? fabsf(v) : read == kReadSquare ? v * v : v;
}

__device__ __forceinline__ float finish_op(int finish, float v) {
  return finish == kFinishSqrt ? sqrtf(v) : finish == kFinishLog ? logf(v) : v;
}

__device__ __forceinline__ float block_combine(int kind, float v, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(kind, v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : identity_of(kind);
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(kind, v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// One block per row: kRowThreads (512) threads for long rows, 128 for short ones. 512 threads need
// __launch_bounds__ to be sure to launch (at most 128 registers a thread of the SM's 65536).
constexpr int kRowThreads = 512;

template <class In, class Out>
__global__ void __launch_bounds__(kRowThreads)
    reduce_rows(const In* __restrict__ src, Out* __restrict__ dst, int64_t r, int kind, float scale, int read, int finish) {
  __shared__ float scratch[32];
  const In* row = src + blockIdx.x * r;
  float acc = identity_of(kind);
  for (int64_t i = threadIdx.x; i < r; i += blockDim.x) acc = combine(kind, acc, read_op(read, to_float(row[i])));
  acc = block_combine(kind, acc, scratch);
  if (threadIdx.x == 0) dst[blockIdx.x] = from_float<Out>(finish_op(finish, acc * scale));
}

// grid.y chunks of r; output [chunks, outer, inner] (chunks == 1: the final [outer, inner]).
template <class In, class Out>
__global__ void reduce_columns(const In* __restrict__ src, Out* __restrict__ dst, int64_t outer, int64_t r,
                               int64_t inner, int kind, float scale, int read, int finish) {
  const int64_t pos = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (pos >= outer * inner) return;
  const int64_t o = pos / inner, i = pos % inner;
  const int64_t chunk = (r + gridDim.y - 1) / gridDim.y;
  const int64_t begin = blockIdx.y * chunk, end = min(r, begin + chunk);
  float acc = identity_of(kind);
  for (int64_t k = begin; k < end; ++k) acc = combine(kind, acc, read_op(read, to_float(src[(o * r + k) * inner + i])));
  dst[blockIdx.y * outer * inner + pos] = from_float<Out>(finish_op(finish, acc * scale));
}

template <class In, class Out>
void launch_pass(const In* src, Out* dst, int64_t outer, int64_t r, int64_t inner, int chunks, int kind, float scale,
                 int read, int finish, cudaStream_t stream) {
  if (inner == 1) {
    reduce_rows<In, Out><<<static_cast<unsigned>(outer), r >= 2048 ? kRowThreads : 128, 0, stream>>>(src, dst, r, kind, scale,
                                                                                                       read, finish);
  } else {
    const dim3 grid(static_cast<unsigned>((outer * inner + 255) / 256), static_cast<unsigned>(chunks));
    reduce_columns<In, Out><<<grid, 256, 0, stream>>>(src, dst, outer, r, inner, kind, scale, read, finish);
  }
}

}  // namespace

ReducePlan::ReducePlan(DType t, const std::vector<int64_t>& dims, const std::vector<bool>& reduced, ReduceKind kind,
                       int sm_count)
    : type_(t), kind_(kind) {
  // Merge neighbouring dims of the same status; a size-1 dim changes nothing and is dropped.
  std::vector<std::pair<int64_t, bool>> runs;
  total_ = 1;
  count_ = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    (reduced[d] ? total_ : count_) *= dims[d];
    if (dims[d] == 1) continue;
    if (!runs.empty() && runs.back().second == reduced[d]) runs.back().first *= dims[d];
    else runs.emplace_back(dims[d], reduced[d]);
  }
  if (count_ == 0) return;  // no output: enqueue launches nothing (and the sizes below divide by 0)
  if (total_ == 0) {
    // Reducing an empty axis: every output is the identity (0, NaN for a mean, -inf for a max, 1 for a product),
    // a row pass over r = 0.
    passes_.push_back({count_, 0, 1, 1, true, true, 0, 0});
    return;
  }
  int64_t remaining = 1;
  for (const auto& run : runs) remaining *= run.first;
  // Innermost reduced run first; each pass shrinks the tensor by its r.
  size_t src_offset = 0;
  bool from_input = true;
  const int64_t busy = 4LL * sm_count * 256;  // threads that keep every SM fed
  for (size_t k = runs.size(); k-- > 0;) {
    if (!runs[k].second) continue;
    // The reduced runs after k are gone already (innermost first): inner is the kept runs only.
    // Conv's bias gradient, [N,C,H,W] summed over {0,2,3}, reduces H*W first and then N over C.
    int64_t inner = 1;
    for (size_t j = k + 1; j < runs.size(); ++j)
      if (!runs[j].second) inner *= runs[j].first;
    int64_t r = runs[k].first, outer = remaining / (r * inner);
    remaining /= r;
    const int64_t outputs = outer * inner;
    if (inner > 1 && outputs < busy && r >= 256) {
      const int64_t chunks = std::min<int64_t>({r / 64, (busy + outputs - 1) / outputs, 65535});
      const size_t partials = workspace_floats_;
      workspace_floats_ += static_cast<size_t>(chunks * outputs);
      passes_.push_back({outer, r, inner, static_cast<int>(chunks), from_input, false, src_offset, partials});
      from_input = false;
      src_offset = partials;
      outer = 1;  // the finishing pass sums the [chunks, outputs] partials
      r = chunks;
      inner = outputs;
    }
    const size_t dst = workspace_floats_;
    workspace_floats_ += static_cast<size_t>(outputs);
    passes_.push_back({outer, r, inner, 1, from_input, false, src_offset, dst});
    from_input = false;
    src_offset = dst;
  }
  if (passes_.empty()) passes_.push_back({1, 1, count_, 1, true, false, 0, 0});  // nothing reduced: a copy
  passes_.back().to_output = true;
}

void ReducePlan::enqueue(const void* in, void* out, void* workspace, cudaStream_t stream) const {
  if (count_ == 0) return;
  float* ws = static_cast<float*>(workspace);
  const float mean_scale = total_ > 0 ? 1.0f / static_cast<float>(total_) : NAN;
  dispatch_float(type_, "Reduce", [&](auto tag) {
    using T = decltype(tag);
    const bool sum_of_terms = kind_ == ReduceKind::kMean || kind_ == ReduceKind::kL1 || kind_ == ReduceKind::kSumSquare ||
                              kind_ == ReduceKind::kL2 || kind_ == ReduceKind::kLogSum;
    const int kind = static_cast<int>(sum_of_terms ? ReduceKind::kSum : kind_);
    const int read_kind = kind_ == ReduceKind::kL1 ? kReadAbs
                          : kind_ == ReduceKind::kSumSquare || kind_ == ReduceKind::kL2 ? kReadSquare
                                                                                         : kReadAsIs;
    const int finish_kind = kind_ == ReduceKind::kL2 ? kFinishSqrt : kind_ == ReduceKind::kLogSum ? kFinishLog : kFinishAsIs;
    for (const Pass& p : passes_) {
      const float scale = p.to_output && kind_ == ReduceKind::kMean ? mean_scale : 1.0f;
      const int read = p.from_input ? read_kind : kReadAsIs, finish = p.to_output ? finish_kind : kFinishAsIs;
      const int chunks = p.chunks;
      if (p.from_input && p.to_output)
        launch_pass(static_cast<const T*>(in), static_cast<T*>(out), p.outer, p.r, p.inner, chunks, kind, scale, read,
                    finish, stream);
      else if (p.from_input)
        launch_pass(static_cast<const T*>(in), ws + p.dst_offset, p.outer, p.r, p.inner, chunks, kind, scale, read, finish,
                    stream);
      else if (p.to_output)
        launch_pass(static_cast<const float*>(ws + p.src_offset), static_cast<T*>(out), p.outer, p.r, p.inner, chunks,
                    kind, scale, read, finish, stream);
      else
        launch_pass(static_cast<const float*>(ws + p.src_offset), ws + p.dst_offset, p.outer, p.r, p.inner, chunks,
                    kind, scale, read, finish, stream);
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
