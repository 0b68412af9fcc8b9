// lrn.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run without a
// GPU) against the CPU backend's one-node LRN, bit for bit, in the three float types: AlexNet's
// size 5 over 4-D tensors, an even size (the window one channel longer after than before), a size
// wider than the channels, a 3-D input, non-default alpha, beta and bias, values around the
// squares' fp16 range, more elements than the grid so the loop goes round; empty tensors.
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
#include "backends/cuda/lrn.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, float spread) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = u(rng);
    if (t == DType::kFloat) x.mutable_as<float>()[k] = v;
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v);
    else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v);
  }
  return x;
}

struct Case {
  std::vector<int64_t> dims;
  int64_t size;
  float alpha, beta, bias, spread;
};

TEST(CudaKernelsEmulated, LrnMatchesTheCpuBitForBit) {
  const Case cases[] = {{{2, 16, 5, 5}, 5, 1e-4f, 0.75f, 1.0f, 4.0f},  // AlexNet's attributes
                        {{3, 7, 4, 6}, 4, 0.3f, 0.5f, 2.0f, 3.0f},      // even size
                        {{1, 3, 9}, 7, 0.02f, 1.5f, 0.5f, 2.0f},        // wider than the channels, 3-D
                        {{2, 6, 3, 3}, 3, 1.0f, 0.75f, 1.0f, 200.0f},   // squares beyond fp16's range
                        {{4, 8, 24, 24}, 5, 1e-3f, 0.75f, 1.0f, 8.0f},  // > 4096 threads: the loop goes round
                        {{0, 4, 3, 3}, 3, 1e-4f, 0.75f, 1.0f, 1.0f}};   // empty
  uint32_t seed = 40;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " size " + std::to_string(c.size) + " dims[1] " +
                   std::to_string(c.dims[1]));
      const Tensor x = drawn(t, c.dims, seed++, c.spread);
      test::OneNode node("LRN", {{"x", x}}, {t});
      node.attr(Attribute::of_int("size", c.size));
      node.attr(Attribute::of_float("alpha", c.alpha));
      node.attr(Attribute::of_float("beta", c.beta));
      node.attr(Attribute::of_float("bias", c.bias));
      const Tensor want = node.run_cpu()[0];
      const emu::LrnShape s = emu::lrn_shape(c.dims, c.size, c.alpha, c.beta, c.bias);
      test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
      emu::lrn(t, s, in.data(), out.data(), 2, nullptr);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
    }
}

TEST(CudaKernelsEmulated, LrnRefusesWhatItCannotNormalise) {
  EXPECT_THROW(emu::lrn_shape({8}, 5, 1e-4f, 0.75f, 1.0f), InputError);
  EXPECT_THROW(emu::lrn_shape({2, 8, 3}, 0, 1e-4f, 0.75f, 1.0f), InputError);
}

}  // namespace
}  // namespace amp
