// max_unpool.cu on the fiber emulator against the CPU backend's one-node MaxUnpool, bit for bit,
// in float, float16, bfloat16 and double: 2-D pooling's unpooled [N, C, 2H, 2W], a 1-D one with
// pads, an output_shape larger than the unpooled tensor (indices re-placed), repeated indices (the
// last write wins, as the CPU's loop has it), more elements than the grid (the loops go round),
// empty X. An index out of range, which the CPU refuses, is dropped.
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
#include "backends/cuda/max_unpool.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = u(rng);
    if (t == DType::kFloat) x.mutable_as<float>()[k] = v;
    else if (t == DType::kDouble) x.mutable_as<double>()[k] = v;
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v);
    else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v);
  }
  return x;
}

Tensor int64s(const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, dims);
  for (size_t k = 0; k < v.size(); ++k) t.mutable_as<int64_t>()[k] = v[k];
  return t;
}

TEST(CudaKernelsEmulated, MaxUnpoolMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> x, kernel, strides, pads, output_shape;  // output_shape empty: none
  };
  const Case cases[] = {{{2, 3, 4, 4}, {2, 2}, {2, 2}, {}, {}},               // unpooled [2, 3, 8, 8]
                        {{1, 2, 5}, {3}, {2}, {1, 1}, {}},                    // 1-D with pads: 9 wide
                        {{2, 2, 3, 3}, {2, 2}, {2, 2}, {}, {2, 2, 7, 8}},     // placed in a larger output
                        {{4, 8, 16, 16}, {2, 2}, {2, 2}, {}, {}},             // 8192 > 16 blocks of 256
                        {{0, 3, 4, 4}, {2, 2}, {2, 2}, {}, {}}};              // empty
  uint32_t seed = 470;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " rank " + std::to_string(c.x.size()) + " dims[0] " +
                   std::to_string(c.x[0]) + (c.output_shape.empty() ? "" : " with output_shape"));
      const Tensor x = drawn(t, c.x, seed++);
      // The unpooled tensor's size, then random indices in it: repeats happen.
      int64_t total = c.x[0] * c.x[1];
      for (size_t d = 0; d < c.kernel.size(); ++d)
        total *= (c.x[d + 2] - 1) * c.strides[d] - (c.pads.empty() ? 0 : c.pads[d] + c.pads[d + c.kernel.size()]) +
                 c.kernel[d];
      std::mt19937 rng(seed++);
      std::vector<int64_t> at(static_cast<size_t>(x.numel()));
      for (int64_t& a : at) a = std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(total - 1, 0))(rng);
      const Tensor indices = int64s(c.x, at);
      test::Feeds feeds = {{"x", x}, {"i", indices}};
      if (!c.output_shape.empty())
        feeds.push_back({"shape", int64s({static_cast<int64_t>(c.output_shape.size())}, c.output_shape)});
      test::OneNode node("MaxUnpool", feeds, {t});
      node.attr(Attribute::of_ints("kernel_shape", c.kernel));
      node.attr(Attribute::of_ints("strides", c.strides));
      if (!c.pads.empty()) node.attr(Attribute::of_ints("pads", c.pads));
      const Tensor want = node.run_cpu()[0];
      const emu::MaxUnpoolShape s = emu::max_unpool_shape(t, c.x, c.x, want.dims, c.kernel, c.strides, c.pads);
      test::GuardedBuffer in(x), idx(indices), work(emu::max_unpool_workspace(s), 0xa5), out(want.nbytes(), 0xa5);
      emu::max_unpool(s, in.data(), static_cast<const int64_t*>(idx.data()), out.data(), work.data(), 2, nullptr);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
    }
}

TEST(CudaKernelsEmulated, MaxUnpoolDropsAnIndexOutOfRange) {
  const std::vector<int64_t> dims = {1, 1, 2, 2};
  const emu::MaxUnpoolShape s = emu::max_unpool_shape(DType::kFloat, dims, dims, {1, 1, 4, 4}, {2, 2}, {2, 2}, {});
  const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const int64_t at[4] = {0, 16, -1, 15};
  test::GuardedBuffer work(emu::max_unpool_workspace(s), 0xa5), out(16 * sizeof(float), 0xa5);
  emu::max_unpool(s, x, at, out.data(), work.data(), 2, nullptr);
  const float* y = static_cast<const float*>(out.data());
  for (int k = 0; k < 16; ++k) EXPECT_EQ(y[k], k == 0 ? 1.0f : k == 15 ? 4.0f : 0.0f) << k;
  EXPECT_THROW(emu::max_unpool_shape(DType::kInt32, dims, dims, dims, {2, 2}, {2, 2}, {}), InputError);
  EXPECT_THROW(emu::max_unpool_shape(DType::kFloat, {1, 4}, {1, 4}, {1, 8}, {2}, {2}, {}), InputError);
}

}  // namespace
}  // namespace amp
