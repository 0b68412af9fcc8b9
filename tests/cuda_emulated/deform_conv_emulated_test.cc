// deform_conv.cu on the fiber emulator against the CPU backend's one-node DeformConv (whose own
// reference is torchvision, tests/backends/cpu_kernels_test.cc) in float, float16 and bfloat16:
// groups and offset groups of 2 with strides, pads, dilations, mask and bias; neither mask nor bias;
// offsets that put taps between pixels and past the border; more outputs than the grid. The CPU
// sums the taps by a GEMM, the kernel one by one: equal to fp32 rounding, so 16-bit results may
// land one step apart.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "graph/amp_ops.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

#define cuda cuda_emulated
#include "backends/cuda/deform_conv.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

TEST(CudaKernelsEmulated, DeformConvMatchesTheCpu) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t groups, offset_groups, stride_h, stride_w, pad, dilation_w;
    bool bias, mask;
  };
  const Case cases[] = {{{2, 4, 9, 8}, {6, 2, 3, 3}, 2, 2, 2, 1, 1, 2, true, true},
                        {{1, 3, 5, 5}, {4, 3, 2, 2}, 1, 1, 1, 1, 0, 1, false, false},
                        {{2, 2, 16, 16}, {8, 2, 3, 3}, 1, 1, 1, 1, 1, 1, false, true}};  // 4096 outputs > 16 blocks
  uint32_t seed = 900;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " groups " + std::to_string(c.groups) + " offset groups " +
                   std::to_string(c.offset_groups));
      emu::DeformConvShape s;
      s.batch = c.x[0], s.channels = c.x[1], s.height = c.x[2], s.width = c.x[3];
      s.outputs = c.w[0], s.kernel_h = c.w[2], s.kernel_w = c.w[3];
      s.groups = c.groups, s.offset_groups = c.offset_groups;
      s.stride_h = c.stride_h, s.stride_w = c.stride_w, s.pad_h = s.pad_w = c.pad, s.dilation_w = c.dilation_w;
      s.out_h = (s.height + 2 * c.pad - (s.kernel_h - 1) - 1) / s.stride_h + 1;
      s.out_w = (s.width + 2 * c.pad - c.dilation_w * (s.kernel_w - 1) - 1) / s.stride_w + 1;
      const int64_t taps = s.kernel_h * s.kernel_w;
      const Tensor x = test::random_tensor(t, c.x, seed++), w = test::random_tensor(t, c.w, seed++, -1.0f, 1.0f);
      const Tensor offset = test::random_tensor(t, {s.batch, 2 * c.offset_groups * taps, s.out_h, s.out_w}, seed++);
      const Tensor bias = test::random_tensor(t, {s.outputs}, seed++);
      const Tensor mask = test::random_tensor(t, {s.batch, c.offset_groups * taps, s.out_h, s.out_w}, seed++, 0.0f, 1.0f);
      test::Feeds in = {{"x", x}, {"w", w}, {"offset", offset}};
      if (c.bias || c.mask) in.push_back({c.bias ? "b" : "", c.bias ? bias : Tensor()});
      if (c.mask) in.push_back({"mask", mask});
      test::OneNode node("DeformConv", in, {t}, kAmpDomain);
      node.attr(Attribute::of_int("group", c.groups));
      node.attr(Attribute::of_int("offset_group", c.offset_groups));
      node.attr(Attribute::of_ints("strides", {c.stride_h, c.stride_w}));
      node.attr(Attribute::of_ints("pads", {c.pad, c.pad, c.pad, c.pad}));
      node.attr(Attribute::of_ints("dilations", {1, c.dilation_w}));
      const Tensor want = node.run_cpu()[0];
      test::GuardedBuffer x_in(x), w_in(w), offset_in(offset), bias_in(bias), mask_in(mask), out(want.nbytes(), 0xa5);
      emu::deform_conv(t, s, x_in.data(), w_in.data(), offset_in.data(), c.bias ? bias_in.data() : nullptr,
                       c.mask ? mask_in.data() : nullptr, out.data(), 2, nullptr);
      Tensor got(t, want.dims);
      std::memcpy(got.mutable_data(), out.data(), want.nbytes());
      test::expect_close(got, want, "DeformConv");
    }
}

}  // namespace
}  // namespace amp
