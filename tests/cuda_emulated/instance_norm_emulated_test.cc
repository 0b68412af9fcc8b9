// instance_norm.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU) against the CPU backend's one-node InstanceNormalization and
// MeanVarianceNormalization, bit for bit, in the three float types: planes of one element, 3-D
// and 5-D inputs, a non-default epsilon, values far from zero (the fp64 statistics' reason),
// planes larger than a block and more groups than the grid so both loops go round; MVN over its
// default axes, a single axis, negative axes, all axes and axes that alternate with kept ones;
// empty tensors. The device's fp64 sums are a tree, the CPU's its lanes: they could differ in a
// double's last bit and so, rarely, flip an fp32 rounding — these cases show they agree.
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
#include "backends/cuda/instance_norm.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, float centre, float spread) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(centre - spread, centre + spread);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = u(rng);
    if (t == DType::kFloat) x.mutable_as<float>()[k] = v;
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v);
    else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v);
  }
  return x;
}

void expect_same_bytes(const void* got, const Tensor& want) {
  const size_t n = want.nbytes();
  if (std::memcmp(got, want.data(), n) == 0) return;
  const size_t es = dtype_size(want.dtype);
  size_t differ = 0, first = n;
  for (size_t e = 0; e < n / es; ++e)
    if (std::memcmp(static_cast<const char*>(got) + e * es, reinterpret_cast<const char*>(want.data()) + e * es, es) != 0) {
      ++differ;
      if (first == n) first = e;
    }
  ADD_FAILURE() << differ << " of " << n / es << " elements differ from the CPU kernel, the first at " << first;
}

TEST(CudaKernelsEmulated, InstanceNormalizationMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims;
    float epsilon, centre, spread;
  };
  const Case cases[] = {{{2, 3, 5, 5}, 1e-5f, 0.0f, 2.0f},      // a style-transfer block, small
                        {{1, 4, 7}, 1e-3f, 3.0f, 1.0f},         // 3-D, non-default epsilon
                        {{2, 2, 2, 3, 4}, 1e-5f, -1.0f, 4.0f},  // 5-D
                        {{3, 5, 1, 1}, 1e-5f, 0.5f, 1.0f},      // one element a plane: y = B
                        {{2, 3}, 1e-5f, 0.0f, 1.0f},            // rank 2: planes of one element
                        {{1, 2, 40, 40}, 1e-5f, 100.0f, 0.5f},  // far from zero; 1600 > 256 threads
                        {{3, 7, 3, 3}, 1e-5f, 0.0f, 3.0f},      // 21 planes > 16 blocks: the grid loop
                        {{0, 3, 4, 4}, 1e-5f, 0.0f, 1.0f},      // empty
                        {{2, 3, 0, 4}, 1e-5f, 0.0f, 1.0f}};     // empty planes
  uint32_t seed = 70;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " rank " + std::to_string(c.dims.size()) + " dims[0] " +
                   std::to_string(c.dims[0]) + " centre " + std::to_string(c.centre));
      const int64_t channels = c.dims[1];
      const Tensor x = drawn(t, c.dims, seed++, c.centre, c.spread);
      const Tensor scale = drawn(t, {channels}, seed++, 1.0f, 0.5f), bias = drawn(t, {channels}, seed++, 0.0f, 1.0f);
      test::OneNode node("InstanceNormalization", {{"x", x}, {"scale", scale}, {"B", bias}}, {t});
      node.attr(Attribute::of_float("epsilon", c.epsilon));
      const Tensor want = node.run_cpu()[0];
      const emu::InstanceNormShape s = emu::instance_norm_shape(c.dims, c.epsilon);
      test::GuardedBuffer in(x), g(scale), b(bias), out(want.nbytes(), 0xa5);
      emu::instance_norm(t, s, in.data(), g.data(), b.data(), out.data(), 2, nullptr);
      expect_same_bytes(out.data(), want);
    }
  EXPECT_THROW(emu::instance_norm_shape({8}, 1e-5f), InputError);
}

TEST(CudaKernelsEmulated, MeanVarianceNormalizationMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims, axes;  // axes empty: the default [0, 2, 3]
    float centre;
  };
  const Case cases[] = {{{2, 3, 4, 5}, {}, 0.0f},            // default axes: a group per channel
                        {{2, 3, 4, 5}, {2, 3}, 5.0f},        // per (n, c): instance statistics
                        {{3, 6, 7}, {-1}, 0.0f},             // a negative axis
                        {{2, 3, 4, 5}, {0, 1, 2, 3}, 2.0f},  // one group
                        {{2, 3, 4, 5}, {0, 2}, 0.0f},        // reduced, kept, reduced, kept
                        {{2, 1, 3, 1, 4}, {1, 2, 3}, 0.0f},  // extent-1 dims dropped
                        {{2, 3, 30, 30}, {}, -40.0f},        // 1800 members > 256 threads
                        {{5, 20, 2}, {0}, 0.0f},             // 40 groups > 16 blocks: the grid loop
                        {{0, 3, 4, 4}, {}, 0.0f}};           // empty
  uint32_t seed = 170;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " rank " + std::to_string(c.dims.size()) + " axes " +
                   std::to_string(c.axes.size()));
      const Tensor x = drawn(t, c.dims, seed++, c.centre, 2.0f);
      test::OneNode node("MeanVarianceNormalization", {{"x", x}}, {t});
      const std::vector<int64_t> axes = c.axes.empty() ? std::vector<int64_t>{0, 2, 3} : c.axes;
      if (!c.axes.empty()) node.attr(Attribute::of_ints("axes", c.axes));
      const Tensor want = node.run_cpu()[0];
      const int64_t rank = static_cast<int64_t>(c.dims.size());
      std::vector<bool> reduced(c.dims.size(), false);
      for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
      test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
      emu::mean_variance_norm(t, emu::axis_groups(c.dims, reduced), in.data(), out.data(), 2, nullptr);
      expect_same_bytes(out.data(), want);
    }
}

}  // namespace
}  // namespace amp
