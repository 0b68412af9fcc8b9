// cumsum.cu, gather_elements.cu, gather_nd.cu and reverse_sequence.cu on the fiber emulator (see
// cuda_kernels_emulated_test.cc for how the kernels run without a GPU) against the CPU backend's
// one-node kernels, bit for bit, in every element type each takes: CumSum inclusive and
// exclusive, forward and reversed, along the first, a middle and the last axis, a scalar, sums
// long enough for 16-bit rounding to tell orders apart; GatherElements and ScatterElements along
// every axis with negative and int32 indices, indices smaller than the data off the axis, and for
// ScatterElements repeated indices under none, add and mul (the CPU's order decides); GatherND
// with batch_dims 0, 1 and 2 and tuples of every length; ReverseSequence time- and batch-major
// with lengths 0 to all steps. Empty tensors, and more lines or elements than the emulated grid's
// 4096 threads so the loops go round. What the kernels refuse while planning is checked too.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/cumsum.cuh"
#include "backends/cuda/gather_elements.cuh"
#include "backends/cuda/gather_nd.cuh"
#include "backends/cuda/reverse_sequence.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

constexpr DType kAllTypes[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt8,
                               DType::kInt16, DType::kInt32,   DType::kInt64,    DType::kUInt8,  DType::kUInt16,
                               DType::kUInt32, DType::kUInt64, DType::kBool};
constexpr DType kCumSumTypes[] = {DType::kFloat,  DType::kFloat16, DType::kBFloat16, DType::kDouble,
                                  DType::kInt32, DType::kInt64,   DType::kUInt32,   DType::kUInt64};

// Uniform in [-spread, spread): floats rounded to their type, integers floored (wrapping into the
// unsigned types), bools true for > 0.
Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, float spread) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = u(rng);
    const int64_t i = static_cast<int64_t>(std::floor(v));
    switch (t) {
      case DType::kFloat: x.mutable_as<float>()[k] = v; break;
      case DType::kFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v); break;
      case DType::kBFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v); break;
      case DType::kDouble: x.mutable_as<double>()[k] = static_cast<double>(v) / 3.0; break;
      case DType::kInt8: x.mutable_as<int8_t>()[k] = static_cast<int8_t>(i); break;
      case DType::kInt16: x.mutable_as<int16_t>()[k] = static_cast<int16_t>(i); break;
      case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(i); break;
      case DType::kInt64: x.mutable_as<int64_t>()[k] = i; break;
      case DType::kUInt8: x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(i); break;
      case DType::kUInt16: x.mutable_as<uint16_t>()[k] = static_cast<uint16_t>(i); break;
      case DType::kUInt32: x.mutable_as<uint32_t>()[k] = static_cast<uint32_t>(i); break;
      case DType::kUInt64: x.mutable_as<uint64_t>()[k] = static_cast<uint64_t>(i); break;
      case DType::kBool: x.mutable_as<uint8_t>()[k] = v > 0; break;
      default: ADD_FAILURE() << "no values for " << dtype_name(t);
    }
  }
  return x;
}

// Indices in [lo, hi) of type t (int32 or int64).
Tensor index_tensor(DType t, const std::vector<int64_t>& dims, uint32_t seed, int64_t lo, int64_t hi) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const int64_t v = u(rng);
    if (t == DType::kInt64) x.mutable_as<int64_t>()[k] = v;
    else x.mutable_as<int32_t>()[k] = static_cast<int32_t>(v);
  }
  return x;
}

Tensor scalar_index(int64_t v) {
  Tensor t(DType::kInt64, {});
  t.mutable_as<int64_t>()[0] = v;
  return t;
}

void expect_same_bytes(const test::GuardedBuffer& got, const Tensor& want) {
  ASSERT_EQ(got.size(), want.nbytes());
  if (want.nbytes()) {
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
  }
}

TEST(CudaKernelsEmulated, CumSumMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const Case cases[] = {{{3, 5, 7}, 1},    // a middle axis
                        {{4, 300}, -1},    // long rows along the last axis: 16-bit rounding shows the order
                        {{6, 2, 3}, 0},    // the first axis
                        {{5000, 2}, 1},    // 5000 lines: the loop goes round
                        {{}, 0},           // a scalar
                        {{0, 4}, 1},       // empty
                        {{3, 0, 2}, -2}};  // an empty axis
  uint32_t seed = 70;
  for (const Case& c : cases)
    for (DType t : kCumSumTypes)
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " dims of rank " + std::to_string(c.dims.size()) + " axis " +
                       std::to_string(c.axis) + " exclusive " + std::to_string(exclusive) + " reverse " +
                       std::to_string(reverse));
          const Tensor x = drawn(t, c.dims, seed++, 60.0f);
          test::OneNode node("CumSum", {{"x", x}, {"axis", scalar_index(c.axis)}}, {t});
          node.attr(Attribute::of_int("exclusive", exclusive));
          node.attr(Attribute::of_int("reverse", reverse));
          const Tensor want = node.run_cpu()[0];
          const emu::CumSumShape s = emu::cumsum_shape(t, c.dims, c.axis, exclusive, reverse);
          test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
          emu::cumsum(t, s, in.data(), out.data(), 2, nullptr);
          expect_same_bytes(out, want);
        }
}

TEST(CudaKernelsEmulated, CumSumRefusesWhatTheCpuRefuses) {
  EXPECT_THROW(emu::cumsum_shape(DType::kFloat, {3, 4}, 2, false, false), InputError);
  EXPECT_THROW(emu::cumsum_shape(DType::kFloat, {3, 4}, -3, false, false), InputError);
  EXPECT_THROW(emu::cumsum_shape(DType::kInt8, {3, 4}, 0, false, false), InputError);
  EXPECT_THROW(emu::cumsum_shape(DType::kBool, {3, 4}, 0, false, false), InputError);
}

struct ElementsCase {
  std::vector<int64_t> data, indices;
  int64_t axis;
  DType index_type;
};

const ElementsCase kElementsCases[] = {
    {{4, 5, 6}, {4, 3, 6}, 1, DType::kInt64},    // a middle axis
    {{4, 5, 6}, {2, 7, 3}, 1, DType::kInt32},    // smaller off the axis, longer along it; int32
    {{4, 5, 6}, {4, 5, 9}, -1, DType::kInt64},   // the last axis, from the back
    {{4, 5, 6}, {3, 5, 6}, 0, DType::kInt64},    // the first axis
    {{9}, {12}, 0, DType::kInt32},               // 1-D
    {{64, 100}, {64, 100}, 1, DType::kInt64},    // 6400 positions: the gather's loop goes round
    {{5000, 2}, {5000, 3}, 1, DType::kInt64},    // 5000 lines: the scatter's loop goes round
    {{4, 5, 6}, {4, 0, 6}, 1, DType::kInt64},    // no indices
    {{0, 5}, {0, 3}, 1, DType::kInt64}};         // empty data

TEST(CudaKernelsEmulated, GatherElementsMatchesTheCpuBitForBit) {
  uint32_t seed = 200;
  for (const ElementsCase& c : kElementsCases)
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(c.axis) + " indices of " +
                   std::to_string(c.indices.size()) + " dims, first " + std::to_string(c.indices[0]));
      const int64_t rank = static_cast<int64_t>(c.data.size());
      const int64_t extent = c.data[static_cast<size_t>(c.axis < 0 ? c.axis + rank : c.axis)];
      const Tensor data = drawn(t, c.data, seed++, 50.0f);
      const Tensor idx = index_tensor(c.index_type, c.indices, seed++, -extent, extent);
      test::OneNode node("GatherElements", {{"data", data}, {"indices", idx}}, {t});
      node.attr(Attribute::of_int("axis", c.axis));
      const Tensor want = node.run_cpu()[0];
      const emu::ElementsShape s = emu::elements_shape("GatherElements", c.data, c.indices, c.axis, t, c.index_type);
      test::GuardedBuffer d(data), i(idx), out(want.nbytes(), 0xa5);
      emu::gather_elements(s, d.data(), i.data(), out.data(), 2, nullptr);
      expect_same_bytes(out, want);
    }
}

TEST(CudaKernelsEmulated, ScatterElementsMatchesTheCpuBitForBitWithRepeatedIndices) {
  uint32_t seed = 300;
  const char* reductions[] = {"none", "add", "mul"};
  for (const ElementsCase& c : kElementsCases)
    for (DType t : kAllTypes)
      for (int r = 0; r < 3; ++r) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + reductions[r] + " axis " + std::to_string(c.axis) +
                     " indices of " + std::to_string(c.indices.size()) + " dims, first " + std::to_string(c.indices[0]));
        const int64_t rank = static_cast<int64_t>(c.data.size());
        const int64_t extent = c.data[static_cast<size_t>(c.axis < 0 ? c.axis + rank : c.axis)];
        // Small values for mul (products stay in range), larger for add (sums round).
        const Tensor data = drawn(t, c.data, seed++, r == 2 ? 2.0f : 50.0f);
        // Indices from few values: along an axis longer in the indices than in the data they repeat.
        const Tensor idx = index_tensor(c.index_type, c.indices, seed++, -extent, extent);
        const Tensor upd = drawn(t, c.indices, seed++, r == 2 ? 2.0f : 50.0f);
        test::OneNode node("ScatterElements", {{"data", data}, {"indices", idx}, {"updates", upd}}, {t});
        node.attr(Attribute::of_int("axis", c.axis));
        node.attr(Attribute::of_string("reduction", reductions[r]));
        const Tensor want = node.run_cpu()[0];
        emu::ElementsShape s = emu::elements_shape("ScatterElements", c.data, c.indices, c.axis, t, c.index_type);
        s.reduction = r;
        test::GuardedBuffer d(data), i(idx), u(upd), out(want.nbytes(), 0xa5);
        emu::scatter_elements(s, d.data(), i.data(), u.data(), out.data(), 2, nullptr);
        expect_same_bytes(out, want);
      }
}

// An index outside the axis: the gather reads zeros, the scatter drops the update (the CPU throws).
TEST(CudaKernelsEmulated, ElementsIndicesOutsideTheAxisReadZerosAndAreDropped) {
  Tensor data(DType::kFloat, {2, 3});
  for (int k = 0; k < 6; ++k) data.mutable_as<float>()[k] = static_cast<float>(k + 1);
  Tensor idx(DType::kInt64, {2, 2});
  const int64_t values[] = {1, 3, -4, 0};
  std::memcpy(idx.mutable_data(), values, sizeof(values));
  const emu::ElementsShape s = emu::elements_shape("GatherElements", {2, 3}, {2, 2}, 1, DType::kFloat, DType::kInt64);
  test::GuardedBuffer d(data), i(idx), out(4 * sizeof(float), 0xa5);
  emu::gather_elements(s, d.data(), i.data(), out.data(), 2, nullptr);
  EXPECT_EQ(out.as(DType::kFloat, {4}).as<float>()[0], 2.0f);
  EXPECT_EQ(out.as(DType::kFloat, {4}).as<float>()[1], 0.0f);
  EXPECT_EQ(out.as(DType::kFloat, {4}).as<float>()[2], 0.0f);
  EXPECT_EQ(out.as(DType::kFloat, {4}).as<float>()[3], 4.0f);

  Tensor upd(DType::kFloat, {2, 2});
  for (int k = 0; k < 4; ++k) upd.mutable_as<float>()[k] = 10.0f * static_cast<float>(k + 1);
  emu::ElementsShape sc = emu::elements_shape("ScatterElements", {2, 3}, {2, 2}, 1, DType::kFloat, DType::kInt64);
  sc.reduction = 1;
  test::GuardedBuffer u(upd), sout(6 * sizeof(float), 0xa5);
  emu::scatter_elements(sc, d.data(), i.data(), u.data(), sout.data(), 2, nullptr);
  const Tensor got = sout.as(DType::kFloat, {6});
  const float want[] = {1, 12, 3, 44, 5, 6};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(got.as<float>()[k], want[k]) << k;
}

TEST(CudaKernelsEmulated, ElementsRefuseWhatTheCpuRefuses) {
  EXPECT_THROW(emu::elements_shape("GatherElements", {}, {}, 0, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::elements_shape("GatherElements", {3, 4}, {3}, 0, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::elements_shape("GatherElements", {3, 4}, {4, 4}, 1, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::elements_shape("GatherElements", {3, 4}, {3, 4}, 2, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::elements_shape("GatherElements", {3, 4}, {3, 4}, 0, DType::kFloat, DType::kFloat), InputError);
  EXPECT_THROW(emu::elements_shape("ScatterElements", std::vector<int64_t>(9, 1), std::vector<int64_t>(9, 1), 0,
                                   DType::kFloat, DType::kInt64),
               InputError);
}

TEST(CudaKernelsEmulated, GatherNDMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> data, indices;
    int64_t batch_dims;
  };
  const Case cases[] = {{{5, 4, 3}, {2, 1}, 0},          // k = 1: slices of [4, 3]
                        {{5, 4, 3}, {2, 3, 2}, 0},       // k = 2, indices of rank 3
                        {{5, 4, 3}, {6, 3}, 0},          // k = 3: elements
                        {{3, 4, 5}, {3, 2, 1}, 1},       // batch_dims 1
                        {{3, 4, 5}, {3, 2}, 1},          // batch_dims 1, one tuple per batch
                        {{2, 3, 4, 5}, {2, 3, 4, 2}, 2},  // batch_dims 2, k = 2
                        {{40, 300}, {40, 5, 1}, 1},      // 60000 elements: the loop goes round
                        {{5, 4, 3}, {0, 2}, 0},          // no tuples
                        {{3, 2, 0}, {3, 1, 1}, 1}};      // empty slices
  uint32_t seed = 500;
  for (const Case& c : cases)
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " batch_dims " + std::to_string(c.batch_dims) + " indices of rank " +
                   std::to_string(c.indices.size()) + ", k " + std::to_string(c.indices.back()));
      const Tensor data = drawn(t, c.data, seed++, 50.0f);
      Tensor idx(DType::kInt64, c.indices);
      std::mt19937 rng(seed++);
      const size_t b = static_cast<size_t>(c.batch_dims);
      for (int64_t k = 0; k < idx.numel(); ++k) {
        const int64_t dim = c.data[b + static_cast<size_t>(k % c.indices.back())];
        idx.mutable_as<int64_t>()[k] = std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng);
      }
      test::OneNode node("GatherND", {{"data", data}, {"indices", idx}}, {t});
      node.attr(Attribute::of_int("batch_dims", c.batch_dims));
      const Tensor want = node.run_cpu()[0];
      const emu::GatherNDShape s = emu::gather_nd_shape(c.data, c.indices, c.batch_dims, t, DType::kInt64);
      test::GuardedBuffer d(data), i(idx), out(want.nbytes(), 0xa5);
      emu::gather_nd(s, d.data(), static_cast<const int64_t*>(i.data()), out.data(), 2, nullptr);
      expect_same_bytes(out, want);
    }
}

TEST(CudaKernelsEmulated, GatherNDRefusesWhatTheCpuRefuses) {
  EXPECT_THROW(emu::gather_nd_shape({5, 4}, {2, 3}, 0, DType::kFloat, DType::kInt64), InputError);     // k > rank
  EXPECT_THROW(emu::gather_nd_shape({5, 4}, {5, 1}, 2, DType::kFloat, DType::kInt64), InputError);     // batch_dims
  EXPECT_THROW(emu::gather_nd_shape({5, 4}, {4, 1}, 1, DType::kFloat, DType::kInt64), InputError);     // batches differ
  EXPECT_THROW(emu::gather_nd_shape({5, 4}, {2, 1}, 0, DType::kFloat, DType::kInt32), InputError);     // int32
  EXPECT_THROW(emu::gather_nd_shape(std::vector<int64_t>(9, 1), {1, 9}, 0, DType::kFloat, DType::kInt64), InputError);
}

TEST(CudaKernelsEmulated, ReverseSequenceMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t time_axis;
    DType lens_type;
  };
  const Case cases[] = {{{6, 4, 3}, 0, DType::kInt64},    // [T, B, 3]
                        {{4, 6, 2, 2}, 1, DType::kInt32},  // [B, T, 2, 2], int32 lengths
                        {{7, 5}, 0, DType::kInt64},        // no trailing dims
                        {{3, 2000, 2}, 1, DType::kInt64},  // 12000 elements: the loop goes round
                        {{0, 3}, 0, DType::kInt64}};       // no steps
  uint32_t seed = 800;
  for (const Case& c : cases)
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " time_axis " + std::to_string(c.time_axis) + " dims of rank " +
                   std::to_string(c.dims.size()));
      const int64_t steps = c.dims[static_cast<size_t>(c.time_axis)];
      const int64_t batch = c.dims[static_cast<size_t>(1 - c.time_axis)];
      const Tensor x = drawn(t, c.dims, seed++, 50.0f);
      Tensor lens = index_tensor(c.lens_type, {batch}, seed++, 0, steps + 1);  // 0 .. all steps
      test::OneNode node("ReverseSequence", {{"x", x}, {"lens", lens}}, {t});
      node.attr(Attribute::of_int("time_axis", c.time_axis));
      node.attr(Attribute::of_int("batch_axis", 1 - c.time_axis));
      const Tensor want = node.run_cpu()[0];
      const emu::ReverseSequenceShape s = emu::reverse_sequence_shape(c.dims, c.time_axis, 1 - c.time_axis, t, c.lens_type);
      test::GuardedBuffer in(x), l(lens), out(want.nbytes(), 0xa5);
      emu::reverse_sequence(s, in.data(), l.data(), out.data(), 2, nullptr);
      expect_same_bytes(out, want);
    }
}

TEST(CudaKernelsEmulated, ReverseSequenceRefusesWhatTheCpuRefuses) {
  EXPECT_THROW(emu::reverse_sequence_shape({4, 3}, 0, 0, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::reverse_sequence_shape({4, 3}, 2, 1, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::reverse_sequence_shape({4}, 0, 1, DType::kFloat, DType::kInt64), InputError);
  EXPECT_THROW(emu::reverse_sequence_shape({4, 3}, 0, 1, DType::kFloat, DType::kFloat), InputError);
}

}  // namespace
}  // namespace amp
