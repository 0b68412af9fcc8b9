// Pieces every kernel family uses: axis handling, numpy broadcasting, integer shape inputs, and a
// parallel loop over the machine's cores (OpenMP) that stays serial below a grain size, where
// waking threads costs more than the work.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/convert.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/numeric.h"
#include "backends/cpu/vector_clones.h"

namespace amp::cpu {

// Calls f(begin, end) over [0, n) in at most `threads` contiguous chunks of at least `grain`.
template <class F>
void parallel_for(int64_t n, int threads, int64_t grain, F&& f) {
  const int64_t chunks = std::min<int64_t>(threads, grain > 0 ? n / grain : n);
  if (chunks <= 1) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) f(n * c / chunks, n * (c + 1) / chunks);
}

// Elements of work below which an elementwise loop stays on one core.
constexpr int64_t kParallelGrain = 32768;

// A negative axis counts from the back; InputError when out of [-rank, rank).
// A 64-bit mixing function (MurmurHash3's finalizer): the counter-based draws of the random ops
// (Dropout, random.cc) hash (seed, element) with it.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

int64_t normalize_axis(int64_t axis, int64_t rank);
// Values of an int32 or int64 tensor (shape inputs: Reshape's shape, Slice's starts, axes ...).
std::vector<int64_t> read_ints(const View& v);
int64_t product(const std::vector<int64_t>& dims, size_t from = 0, size_t to = SIZE_MAX);
std::string dims_str(const std::vector<int64_t>& dims);
// Row-major strides of dims.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims);

// numpy broadcasting of several inputs. The output is walked in rows of `inner` contiguous
// elements; dims with the same broadcast pattern are merged first so rows are as long as possible
// (a [N,C,H,W] + [1,C,1,1] bias add walks rows of H*W with the bias fixed per row).
class Broadcast {
 public:
  explicit Broadcast(const std::vector<const std::vector<int64_t>*>& inputs);
  // The broadcast result shape; InputError naming both shapes when they are incompatible.
  static std::vector<int64_t> result_dims(const std::vector<const std::vector<int64_t>*>& inputs);

  const std::vector<int64_t>& out_dims() const { return out_dims_; }
  int64_t rows() const { return rows_; }
  int64_t inner() const { return inner_; }
  size_t inputs() const { return inner_stride_.size(); }
  // 1 when input i moves along a row, 0 when it repeats one element.
  int64_t inner_stride(size_t i) const { return inner_stride_[i]; }
  // Element offset of row r's first element in each input.
  void row_offsets(int64_t r, int64_t* offsets) const;

 private:
  std::vector<int64_t> out_dims_;
  std::vector<int64_t> outer_dims_;                // merged dims above the row
  std::vector<std::vector<int64_t>> outer_stride_;  // per input, per outer dim (0 when broadcast)
  std::vector<int64_t> inner_stride_;
  int64_t rows_ = 1, inner_ = 1;
};

// Walks the output in spans, in parallel: f(row, first column, columns). Whole rows when there are
// at least as many rows as threads; otherwise each row is cut into up to `threads` column spans, so
// that one long row (two tensors of one shape merge into a single row) still uses every core.
template <class F>
void for_each_span(const Broadcast& b, int threads, F&& f) {
  const int64_t inner = b.inner(), rows = b.rows();
  const int64_t parts = rows >= threads ? 1 : std::clamp<int64_t>((inner + kParallelGrain - 1) / kParallelGrain, 1, threads);
  const int64_t span = (inner + parts - 1) / parts;
  parallel_for(rows * parts, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, span)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t r = t / parts, c0 = t % parts * span, c1 = std::min(inner, c0 + span);
                   if (c0 < c1) f(r, c0, c1 - c0);
                 }
               });
}

// The same with each span's first output element and each input's offset there: f(output
// element, input offsets, elements). At most 4 inputs (the fused elementwise kernel walks more
// itself).
template <class F>
void for_each_row(const Broadcast& b, int threads, F&& f) {
  if (b.inputs() > 4) throw Error("internal: for_each_row takes at most 4 inputs");
  for_each_span(b, threads, [&](int64_t r, int64_t c0, int64_t n) {
    int64_t offs[4];
    b.row_offsets(r, offs);
    for (size_t i = 0; i < b.inputs(); ++i) offs[i] += c0 * b.inner_stride(i);
    f(r * b.inner() + c0, offs, n);
  });
}

// fp32 copies of 16-bit data and back (T is f16 or bf16), for the products that run through sgemm.
template <class T>
void widen(const T* in, float* out, int64_t n, int threads) {
  parallel_for(n, threads, kParallelGrain, [&](int64_t b, int64_t e) { widen(in + b, out + b, e - b); });
}
template <class T>
void narrow(const float* in, T* out, int64_t n, int threads) {
  parallel_for(n, threads, kParallelGrain, [&](int64_t b, int64_t e) { narrow(in + b, out + b, e - b); });
}

// Bytes of fp32 scratch for n elements, rounded up so consecutive scratch arrays stay aligned.
// out[j] = value(j) for j in [0, n), each value (fp32 or fp64) rounded once to T as convert<T>
// rounds it. 16-bit results go through a block of fp32 (fp64 values rounded to odd, which keeps the
// one rounding exact) and are narrowed with the vector conversions.
namespace store_rows_detail {
template <class V>
AMP_VECTOR_CLONES void fill_block(float* block, int64_t b, int64_t e, const V& value) {
  for (int64_t j = b; j < e; ++j) {
    const auto v = value(j);
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>)
      block[j - b] = double_to_float_round_odd(v);
    else
      block[j - b] = static_cast<float>(v);
  }
}
template <class T, class V>
AMP_VECTOR_CLONES void fill(T* out, int64_t n, const V& value) {
  for (int64_t j = 0; j < n; ++j) out[j] = convert<T>(value(j));
}
}  // namespace store_rows_detail

template <class T, class V>
void store_rows(T* out, int64_t n, V&& value) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    constexpr int64_t kBlock = 256;
    float block[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(n, b + kBlock);
      store_rows_detail::fill_block(block, b, e, value);
      narrow(block, out + b, e - b);
    }
  } else {
    store_rows_detail::fill(out, n, value);
  }
}

inline size_t fp32_scratch(int64_t n) { return (static_cast<size_t>(n) * 4 + 63) / 64 * 64; }

}  // namespace amp::cpu
