// The integer comparisons (int_compare.cuh): one kernel per comparison and index type, a thread
// per output element reading each operand through its broadcast strides.
#include "backends/cuda/int_compare.cuh"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

template <IntComparison Op, class I>
__device__ __forceinline__ bool compare(I a, I b) {
  if constexpr (Op == IntComparison::kEqual) return a == b;
  else if constexpr (Op == IntComparison::kLess) return a < b;
  else if constexpr (Op == IntComparison::kLessOrEqual) return a <= b;
  else if constexpr (Op == IntComparison::kGreater) return a > b;
  else return a >= b;
}

// A thread per output element in a grid-stride loop; the coordinate is split from the innermost
// dim outwards, so after merging a mask against one pad id is a single division-free dim.
template <IntComparison Op, class I>
__global__ void __launch_bounds__(256)
    int_compare_kernel(IntCompareShape s, const I* __restrict__ a, const I* __restrict__ b, bool* __restrict__ out) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < s.numel;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = t, ia = 0, ib = 0;
    for (int d = s.rank - 1; d > 0; --d) {
      const int64_t c = rest % s.dims[d];
      rest /= s.dims[d];
      ia += c * s.a_strides[d];
      ib += c * s.b_strides[d];
    }
    if (s.rank > 0) {
      ia += rest * s.a_strides[0];
      ib += rest * s.b_strides[0];
    }
    out[t] = compare<Op>(a[ia], b[ib]);
  }
}

template <IntComparison Op, class I>
void launch(const IntCompareShape& s, const void* a, const void* b, bool* out, int sm_count, cudaStream_t stream) {
  int_compare_kernel<Op, I><<<grid_stride_blocks(s.numel, sm_count), 256, 0, stream>>>(
      s, static_cast<const I*>(a), static_cast<const I*>(b), out);
}

template <class I>
void launch(const IntCompareShape& s, const void* a, const void* b, bool* out, int sm_count, cudaStream_t stream) {
  switch (s.op) {
    case IntComparison::kEqual: launch<IntComparison::kEqual, I>(s, a, b, out, sm_count, stream); break;
    case IntComparison::kLess: launch<IntComparison::kLess, I>(s, a, b, out, sm_count, stream); break;
    case IntComparison::kLessOrEqual: launch<IntComparison::kLessOrEqual, I>(s, a, b, out, sm_count, stream); break;
    case IntComparison::kGreater: launch<IntComparison::kGreater, I>(s, a, b, out, sm_count, stream); break;
    case IntComparison::kGreaterOrEqual: launch<IntComparison::kGreaterOrEqual, I>(s, a, b, out, sm_count, stream); break;
  }
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

IntCompareShape int_compare_shape(IntComparison op, DType type, const std::vector<int64_t>& a,
                                  const std::vector<int64_t>& b) {
  if (type != DType::kInt32 && type != DType::kInt64)
    throw InputError("the integer comparison kernel compares int32 or int64, not " + std::string(dtype_name(type)));
  IntCompareShape s;
  s.op = op;
  s.type = type;
  // Right-aligned as ONNX broadcasts; each operand's stride is 0 along a dim it repeats.
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> dims(rank), sa(rank), sb(rank);
  int64_t stride_a = 1, stride_b = 1;
  for (size_t k = rank; k-- > 0;) {
    const size_t from_end = rank - 1 - k;
    const int64_t da = from_end < a.size() ? a[a.size() - 1 - from_end] : 1;
    const int64_t db = from_end < b.size() ? b[b.size() - 1 - from_end] : 1;
    if (da != db && da != 1 && db != 1)
      throw InputError("operands of dims " + dims_text(a) + " and " + dims_text(b) + " do not broadcast");
    dims[k] = da == 1 ? db : da;
    sa[k] = da == 1 ? 0 : stride_a;
    sb[k] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  s.numel = 1;
  for (int64_t d : dims) s.numel *= d;
  if (s.numel == 0) return s;  // nothing to launch
  // Dims of extent 1 dropped; a dim merged into the one before it when both operands step
  // through the pair as one dim (a stride of 0 in both counts: a repeat of a repeat).
  for (size_t k = 0; k < rank; ++k) {
    if (dims[k] == 1) continue;
    const int r = s.rank;
    if (r > 0 && s.a_strides[r - 1] == sa[k] * dims[k] && s.b_strides[r - 1] == sb[k] * dims[k]) {
      s.dims[r - 1] *= dims[k];
      s.a_strides[r - 1] = sa[k];
      s.b_strides[r - 1] = sb[k];
      continue;
    }
    if (r == kMaxCompareDims)
      throw InputError("comparing dims " + dims_text(a) + " and " + dims_text(b) + " needs more than " +
                       std::to_string(kMaxCompareDims) + " dims after merging");
    s.dims[r] = dims[k];
    s.a_strides[r] = sa[k];
    s.b_strides[r] = sb[k];
    s.rank = r + 1;
  }
  return s;
}

void int_compare(const IntCompareShape& s, const void* a, const void* b, bool* out, int sm_count, cudaStream_t stream) {
  if (s.numel == 0) return;
  if (s.type == DType::kInt64) launch<int64_t>(s, a, b, out, sm_count, stream);
  else launch<int32_t>(s, a, b, out, sm_count, stream);
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
