// int_compare.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU): Equal, Less, LessOrEqual, Greater and GreaterOrEqual of int32 and int64 tensors,
// launched as IntCompare::prepare (int_compare_ops.cc) launches them, against the CPU backend's
// one-node model of the same op, bool for bool. The values sit around 2^24 + 2^30 (int32) and 2^60
// (int64) and differ by 1 or not at all: through fp32 (the generated kernels' registers) most of
// those unequal pairs would compare equal, which the test counts so that it cannot pass on data
// where fp32 would have been exact. Shapes: a mask against one pad id (scalar either side), rows,
// broadcasts on both sides that do not merge, more elements than the grid (the emulated device's
// 2 SMs give 16 blocks of 256 threads), empty tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/int_compare.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

struct Comparison {
  const char* op;
  emu::IntComparison kind;
};
constexpr Comparison kComparisons[] = {{"Equal", emu::IntComparison::kEqual},
                                       {"Less", emu::IntComparison::kLess},
                                       {"LessOrEqual", emu::IntComparison::kLessOrEqual},
                                       {"Greater", emu::IntComparison::kGreater},
                                       {"GreaterOrEqual", emu::IntComparison::kGreaterOrEqual}};

// base + {-1, 0, 1}, drawn: neighbours that fp32 rounds together above 2^24.
Tensor ids(DType t, const std::vector<int64_t>& dims, uint32_t seed, int64_t base) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const int64_t v = base + static_cast<int64_t>(rng() % 3) - 1;
    if (t == DType::kInt64) x.mutable_as<int64_t>()[k] = v;
    else x.mutable_as<int32_t>()[k] = static_cast<int32_t>(v);
  }
  return x;
}

int64_t element(const Tensor& x, int64_t k) {
  return x.dtype == DType::kInt64 ? x.as<int64_t>()[k] : x.as<int32_t>()[k];
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t k = 0; k < d.size(); ++k) s += (k ? "," : "") + std::to_string(d[k]);
  return s + "]";
}

// Runs every comparison on a and b; returns how many of Equal's unequal pairs fp32 would call equal.
int64_t check(const Tensor& a, const Tensor& b) {
  int64_t fp32_misses = 0;
  for (const Comparison& c : kComparisons) {
    SCOPED_TRACE(std::string(c.op) + " " + std::string(dtype_name(a.dtype)) + " " + dims_text(a.dims) + " " +
                 dims_text(b.dims));
    test::OneNode node(c.op, {{"a", a}, {"b", b}}, {DType::kBool});
    const Tensor want = node.run_cpu()[0];
    const emu::IntCompareShape s = emu::int_compare_shape(c.kind, a.dtype, a.dims, b.dims);
    if (s.numel != want.numel()) {
      ADD_FAILURE() << s.numel << " elements, want " << want.numel();
      continue;
    }
    test::GuardedBuffer in_a(a), in_b(b), out(static_cast<size_t>(want.numel()), 0xa5);
    emu::int_compare(s, in_a.data(), in_b.data(), static_cast<bool*>(out.data()), 2, nullptr);
    const unsigned char* got = static_cast<const unsigned char*>(out.data());
    const unsigned char* ref = reinterpret_cast<const unsigned char*>(want.data());
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got[i] != ref[i]) {
        ADD_FAILURE() << "[" << i << "]: " << int{got[i]} << " want " << int{ref[i]};
        break;
      }
    if (c.kind != emu::IntComparison::kEqual) continue;
    // The same pairs through fp32, read back from the broadcast as the CPU read them: equal-as-fp32
    // but unequal outputs. Only for operands of one shape or a scalar (enough to find them).
    if (a.dims == b.dims || b.numel() == 1)
      for (int64_t i = 0; i < want.numel(); ++i) {
        const int64_t x = element(a, i), y = element(b, b.numel() == 1 ? 0 : i);
        if (!ref[i] && static_cast<float>(x) == static_cast<float>(y)) ++fp32_misses;
      }
  }
  return fp32_misses;
}

TEST(CudaKernelsEmulated, IntegerComparisonsAreExactAndMatchTheCpu) {
  const int64_t bases[] = {int64_t{1} << 60, (int64_t{1} << 30) + (int64_t{1} << 24)};
  const DType types[] = {DType::kInt64, DType::kInt32};
  uint32_t seed = 900;
  for (int k = 0; k < 2; ++k) {
    const DType t = types[k];
    const int64_t base = bases[k];
    auto draw = [&](const std::vector<int64_t>& dims) { return ids(t, dims, seed++, base); };
    // The key padding mask: tokens [B, T] against one pad id, and the other way round.
    const Tensor pad = draw({});
    EXPECT_GT(check(draw({4, 37}), pad), 0) << "no pair fp32 would have got wrong";
    check(pad, draw({4, 37}));
    // One shape; then more elements than the grid's 4096 threads, so the loop goes round.
    EXPECT_GT(check(draw({3, 50}), draw({3, 50})), 0);
    check(draw({5000}), draw({5000}));
    // A row against a matrix; broadcasts on both sides ([3,1,5] with [4,1] is [3,4,5]); a
    // middle-axis broadcast; a leading dim of 1 on one side.
    check(draw({2, 3, 4, 5}), draw({5}));
    check(draw({3, 1, 5}), draw({4, 1}));
    check(draw({2, 3, 4, 5}), draw({3, 1, 1}));
    check(draw({1, 6, 7}), draw({6, 7}));
    // Empty: nothing launched, nothing written.
    check(draw({0, 3}), draw({3}));
  }
}

TEST(CudaKernelsEmulated, IntegerComparisonShapesMergeAndRefuse) {
  // Tokens against a scalar is one dim; a row broadcast two; [3,1,5] with [4,1] three.
  EXPECT_EQ(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kInt64, {4, 37}, {}).rank, 1);
  EXPECT_EQ(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kInt64, {2, 3, 4, 5}, {5}).rank, 2);
  EXPECT_EQ(emu::int_compare_shape(emu::IntComparison::kLess, DType::kInt32, {3, 1, 5}, {4, 1}).rank, 3);
  // Dims that do not broadcast; types other than int32 and int64; 18 dims that alternate which
  // operand repeats, so none merge.
  EXPECT_THROW(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kInt64, {4, 3}, {4}), InputError);
  EXPECT_THROW(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kFloat, {4}, {4}), InputError);
  EXPECT_THROW(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kInt16, {4}, {4}), InputError);
  std::vector<int64_t> a, b;
  for (int k = 0; k < 9; ++k) a.insert(a.end(), {2, 1}), b.insert(b.end(), {1, 2});
  EXPECT_THROW(emu::int_compare_shape(emu::IntComparison::kEqual, DType::kInt64, a, b), InputError);
}

}  // namespace
}  // namespace amp
