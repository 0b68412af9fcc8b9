// mean.cu, bit_shift.cu and bitwise.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for
// how the kernels run without a GPU) against the CPU backend's one-node Mean, BitShift and bitwise
// ops, bit for bit: Mean of one to four operands broadcast against each other (a scalar, a row, a
// column) in float, float16, bfloat16 and double; BitShift LEFT and RIGHT in the four unsigned types
// with shifts up to and beyond the type's width (which give 0), broadcast either way; BitwiseAnd,
// Or, Xor (broadcast either way) and Not on every bit pattern of the eight integer types. More
// elements than the emulated grid's 4096 threads, and empty tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/bit_shift.cuh"
#include "backends/cuda/bitwise.cuh"
#include "backends/cuda/mean.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

// Uniform in [lo, hi): floats rounded to their type, integers floored.
Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, double lo, double hi) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const double v = u(rng);
    const uint64_t i = static_cast<uint64_t>(std::floor(v));
    switch (t) {
      case DType::kFloat: x.mutable_as<float>()[k] = static_cast<float>(v); break;
      case DType::kFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_fp16(static_cast<float>(v)); break;
      case DType::kBFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_bf16(static_cast<float>(v)); break;
      case DType::kDouble: x.mutable_as<double>()[k] = v; break;
      case DType::kUInt8: x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(i); break;
      case DType::kUInt16: x.mutable_as<uint16_t>()[k] = static_cast<uint16_t>(i); break;
      case DType::kUInt32: x.mutable_as<uint32_t>()[k] = static_cast<uint32_t>(i); break;
      case DType::kUInt64: x.mutable_as<uint64_t>()[k] = i * 0x9e3779b97f4a7c15ull; break;  // all 64 bits
      default: ADD_FAILURE() << "no values for " << dtype_name(t);
    }
  }
  return x;
}

void expect_same_bytes(const test::GuardedBuffer& got, const Tensor& want) {
  ASSERT_EQ(got.size(), want.nbytes());
  if (want.nbytes()) {
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
  }
}

TEST(CudaKernelsEmulated, MeanMatchesTheCpuBitForBit) {
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{5, 7}},                                  // one operand: itself, rounded through the division by 1
      {{5, 7}, {5, 7}, {5, 7}},                  // three of one shape: a division by 3 rounds
      {{4, 1, 6}, {5, 1}, {}, {1, 5, 6}},        // four, broadcast: a column, a scalar, a plane
      {{70, 80}, {80}},                          // 5600 elements: the loop goes round
      {{0, 3}, {3}}};                            // empty
  uint32_t seed = 60;
  for (const auto& dims : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(dims.size()) + " operands");
      test::Feeds feeds;
      std::vector<std::vector<int64_t>> all;
      for (size_t k = 0; k < dims.size(); ++k) {
        feeds.push_back({"x" + std::to_string(k), drawn(t, dims[k], seed++, -100.0, 100.0)});
        all.push_back(dims[k]);
      }
      test::OneNode node("Mean", feeds, {t});
      const Tensor want = node.run_cpu()[0];
      const emu::BroadcastOperands b = emu::broadcast_operands("Mean", want.dims, all);
      std::vector<std::unique_ptr<test::GuardedBuffer>> in;
      std::vector<const void*> ptrs;
      for (const auto& f : feeds) {
        in.push_back(std::make_unique<test::GuardedBuffer>(f.second));
        ptrs.push_back(in.back()->data());
      }
      test::GuardedBuffer out(want.nbytes(), 0xa5);
      emu::mean(t, b, ptrs, out.data(), 2, nullptr);
      expect_same_bytes(out, want);
    }
}

TEST(CudaKernelsEmulated, BitShiftMatchesTheCpuBitForBit) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{6, 9}, {6, 9}}, {{6, 9}, {9}}, {{1}, {4, 5}}, {{80, 70}, {80, 1}}, {{0, 2}, {2}}};
  uint32_t seed = 80;
  for (const auto& [xd, yd] : cases)
    for (DType t : {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64})
      for (const char* direction : {"LEFT", "RIGHT"}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + direction);
        const double bits = 8.0 * static_cast<double>(dtype_size(t));
        const Tensor x = drawn(t, xd, seed++, 0.0, 250.0);
        const Tensor y = drawn(t, yd, seed++, 0.0, bits + 3.0);  // some at or beyond the width
        test::OneNode node("BitShift", {{"x", x}, {"y", y}}, {t});
        node.attr(Attribute::of_string("direction", direction));
        const Tensor want = node.run_cpu()[0];
        const emu::BroadcastOperands b = emu::broadcast_operands("BitShift", want.dims, {xd, yd});
        test::GuardedBuffer px(x), py(y), out(want.nbytes(), 0xa5);
        emu::bit_shift(t, std::string(direction) == "LEFT", b, px.data(), py.data(), out.data(), 2, nullptr);
        expect_same_bytes(out, want);
      }
}

TEST(CudaKernelsEmulated, BitwiseOpsMatchTheCpuBitForBit) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{6, 9}, {6, 9}}, {{6, 9}, {9}}, {{}, {4, 5}}, {{80, 70}, {80, 1}}, {{0, 2}, {2}}};
  struct Op {
    const char* name;
    emu::BitwiseOp op;
  };
  const Op ops[] = {{"BitwiseAnd", emu::BitwiseOp::kAnd}, {"BitwiseOr", emu::BitwiseOp::kOr},
                    {"BitwiseXor", emu::BitwiseOp::kXor}, {"BitwiseNot", emu::BitwiseOp::kNot}};
  std::mt19937 rng(90);
  auto bits = [&](DType t, const std::vector<int64_t>& dims) {  // every bit pattern, negative values included
    Tensor x(t, dims);
    for (size_t k = 0; k < x.nbytes(); ++k) x.mutable_data()[k] = static_cast<uint8_t>(rng());
    return x;
  };
  for (const auto& [xd, yd] : cases)
    for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16,
                    DType::kUInt32, DType::kUInt64})
      for (const Op& op : ops) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + op.name);
        const bool unary = op.op == emu::BitwiseOp::kNot;
        const Tensor x = bits(t, xd), y = bits(t, yd);
        test::OneNode node = unary ? test::OneNode(op.name, {{"x", x}}, {t}, kAmpDomain)
                                   : test::OneNode(op.name, {{"x", x}, {"y", y}}, {t}, kAmpDomain);
        const Tensor want = node.run_cpu()[0];
        const emu::BroadcastOperands b =
            unary ? emu::broadcast_operands(op.name, want.dims, {xd}) : emu::broadcast_operands(op.name, want.dims, {xd, yd});
        test::GuardedBuffer px(x), py(y), out(want.nbytes(), 0xa5);
        emu::bitwise(op.op, t, b, px.data(), unary ? nullptr : py.data(), out.data(), 2, nullptr);
        expect_same_bytes(out, want);
      }
}

TEST(CudaKernelsEmulated, BroadcastOperandsRefuseWhatDoesNotBroadcast) {
  EXPECT_THROW(emu::broadcast_operands("Mean", {4, 5}, {{4, 5}, {3}}), InputError);
  EXPECT_THROW(emu::broadcast_operands("Mean", {4, 5}, {{2, 4, 5}}), InputError);
  EXPECT_THROW(emu::broadcast_operands("Mean", std::vector<int64_t>(9, 1), {{1}}), InputError);
  EXPECT_THROW(emu::broadcast_operands("Mean", {2}, std::vector<std::vector<int64_t>>(9, {2})), InputError);
}

}  // namespace
}  // namespace amp
