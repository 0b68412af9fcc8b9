// top_k.cu on the fiber emulator against the CPU backend's one-node TopK, values and indices bit
// for bit, in float, float16, bfloat16, double, int32 and int64: values drawn from a handful so
// ties are everywhere (equal values keep the lower index first), NaNs among floats, largest and
// smallest, the last axis, a middle one and a negative one, K = 1, K = the axis's extent (a full
// sort) and K = 0, lanes longer than a block and more lanes than the grid (both loops go round),
// an empty lane set. K out of range is refused.
#include <gtest/gtest.h>

#include <cmath>
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
#include "backends/cuda/top_k.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

void put(Tensor& x, int64_t k, float v) {
  switch (x.dtype) {
    case DType::kFloat: x.mutable_as<float>()[k] = v; break;
    case DType::kFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v); break;
    case DType::kBFloat16: x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v); break;
    case DType::kDouble: x.mutable_as<double>()[k] = v; break;
    case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(v); break;
    default: x.mutable_as<int64_t>()[k] = static_cast<int64_t>(v); break;
  }
}

// Values from {-3, ..., 3} (ties), a few halves, and for the float types a NaN now and then.
Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-6, 6);
  const bool floats = t != DType::kInt32 && t != DType::kInt64;
  for (int64_t k = 0; k < x.numel(); ++k) {
    const int v = u(rng);
    put(x, k, floats && k % 17 == 5 ? NAN : floats ? v * 0.5f : static_cast<float>(v));
  }
  return x;
}

Tensor scalar_k(int64_t k) {
  Tensor t(DType::kInt64, {1});
  t.mutable_as<int64_t>()[0] = k;
  return t;
}

TEST(CudaKernelsEmulated, TopKMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis, k;
  };
  const Case cases[] = {{{4, 30}, -1, 5},       // the last axis
                        {{3, 9, 4}, 1, 9},      // a middle axis, K = its extent: a full sort
                        {{2, 5, 3}, -2, 1},     // a negative axis, K = 1
                        {{2, 600}, 1, 40},      // 600 > 256 threads
                        {{40, 7}, 1, 3},        // 40 lanes > 16 blocks: the grid loop
                        {{3, 8}, 1, 0},         // K = 0: empty outputs
                        {{0, 8}, 1, 2},         // no lanes
                        {{6}, 0, 6}};           // rank 1
  uint32_t seed = 370;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32, DType::kInt64})
      for (bool largest : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + (largest ? " largest" : " smallest") + " dims[0] " +
                     std::to_string(c.dims[0]) + " axis " + std::to_string(c.axis) + " k " + std::to_string(c.k));
        const Tensor x = drawn(t, c.dims, seed++);
        test::OneNode node("TopK", {{"x", x}, {"k", scalar_k(c.k)}}, {t, DType::kInt64});
        node.attr(Attribute::of_int("axis", c.axis));
        node.attr(Attribute::of_int("largest", largest ? 1 : 0));
        node.attr(Attribute::of_int("sorted", seed % 2));
        const std::vector<Tensor> want = node.run_cpu();
        const emu::TopKShape s = emu::top_k_shape(c.dims, c.axis, c.k, largest);
        test::GuardedBuffer in(x), values(want[0].nbytes(), 0xa5), indices(want[1].nbytes(), 0xa5);
        emu::top_k(t, s, in.data(), values.data(), static_cast<int64_t*>(indices.data()), 2, nullptr);
        EXPECT_EQ(std::memcmp(values.data(), want[0].data(), want[0].nbytes()), 0) << "values differ";
        EXPECT_EQ(std::memcmp(indices.data(), want[1].data(), want[1].nbytes()), 0) << "indices differ";
      }
}

TEST(CudaKernelsEmulated, TopKRefusesWhatItCannotTake) {
  EXPECT_THROW(emu::top_k_shape({}, 0, 1, true), InputError);
  EXPECT_THROW(emu::top_k_shape({3, 4}, 2, 1, true), InputError);
  EXPECT_THROW(emu::top_k_shape({3, 4}, -1, 5, true), InputError);
  EXPECT_THROW(emu::top_k_shape({3, 4}, -1, -1, true), InputError);
}

}  // namespace
}  // namespace amp
