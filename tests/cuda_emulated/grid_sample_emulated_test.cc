// grid_sample.cu on the fiber emulator against the CPU backend's one-node GridSample (and its
// gradient, ai.onnx_amp GridSampleGrad: dX and dGrid), bit for bit,
// in float, float16 and bfloat16: every mode (bilinear, nearest, bicubic) x padding_mode (zeros,
// border, reflection) x align_corners, with a grid reaching past the map, points on pixel centres
// and edges (exact halves for nearest's rounding), a non-finite grid value, a grid of another float
// type than X, more outputs than the grid of threads (the loop goes round) and no outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/grid_sample.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

Tensor of_floats(DType t, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  Tensor x(t, dims);
  for (size_t k = 0; k < v.size(); ++k) {
    if (t == DType::kFloat) x.mutable_as<float>()[k] = v[k];
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v[k]);
    else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v[k]);
  }
  return x;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// X [2, 3, 5, 6] at a grid [2, 9, 7, 2]: random points in [-1.3, 1.3], then exact ones (the map's
// corners and centre, -1 and 1, a point past the edge by a whole map) and a NaN and an infinity.
std::vector<float> grid_points() {
  std::vector<float> g = uniform(2 * 9 * 7 * 2, 31, -1.3f, 1.3f);
  const float exact[] = {-1.0f, -1.0f, 1.0f, 1.0f, 0.0f, 0.0f, -1.0f, 1.0f, 0.2f, -0.6f, 3.0f, -3.0f, 0.5f, 0.25f};
  for (size_t k = 0; k < sizeof(exact) / sizeof(exact[0]); ++k) g[k] = exact[k];
  g[20] = std::numeric_limits<float>::quiet_NaN();
  g[23] = std::numeric_limits<float>::infinity();
  return g;
}

void expect_like_cpu(DType xt, DType gt, const char* mode, const char* padding, int align, int sm_count) {
  SCOPED_TRACE(std::string(dtype_name(xt)) + " X, " + std::string(dtype_name(gt)) + " grid, " + mode + " " + padding + " align_corners " +
               std::to_string(align));
  const Tensor x = of_floats(xt, {2, 3, 5, 6}, uniform(2 * 3 * 5 * 6, 30, -2.0f, 2.0f));
  const Tensor grid = of_floats(gt, {2, 9, 7, 2}, grid_points());
  test::OneNode node("GridSample", {{"x", x}, {"grid", grid}}, {xt});
  node.attr(Attribute::of_string("mode", mode));
  node.attr(Attribute::of_string("padding_mode", padding));
  node.attr(Attribute::of_int("align_corners", align));
  const Tensor want = node.run_cpu()[0];
  emu::GridSampleShape s;
  s.batch = 2;
  s.channels = 3;
  s.height = 5;
  s.width = 6;
  s.out_h = 9;
  s.out_w = 7;
  s.mode = std::string(mode) == "bilinear" ? 0 : std::string(mode) == "nearest" ? 1 : 2;
  s.padding = std::string(padding) == "zeros" ? 0 : std::string(padding) == "border" ? 1 : 2;
  s.align_corners = align != 0;
  test::GuardedBuffer in(x), points(grid), out(want.nbytes(), 0xa5);
  emu::grid_sample(xt, gt, s, in.data(), points.data(), out.data(), sm_count, nullptr);
  ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
}

TEST(CudaKernelsEmulated, GridSampleMatchesTheCpuBitForBit) {
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* padding : {"zeros", "border", "reflection"})
        for (int align = 0; align < 2; ++align) expect_like_cpu(t, t, mode, padding, align, 2);
  // 2 * 3 * 63 = 378 outputs over one block of 256 threads: the loop goes round.
  expect_like_cpu(DType::kFloat16, DType::kFloat, "bicubic", "reflection", 0, 1);
  expect_like_cpu(DType::kFloat, DType::kBFloat16, "bilinear", "border", 1, 1);
}

// GridSampleGrad: dX and dGrid together and each alone, against the CPU's, bit for bit.
void expect_grad_like_cpu(DType xt, DType gt, const char* mode, const char* padding, int align, int sm_count) {
  SCOPED_TRACE(std::string("gradient, ") + std::string(dtype_name(xt)) + " X, " + std::string(dtype_name(gt)) + " grid, " +
               mode + " " + padding + " align_corners " + std::to_string(align));
  const Tensor dy = of_floats(xt, {2, 3, 9, 7}, uniform(2 * 3 * 9 * 7, 32, -1.0f, 1.0f));
  const Tensor x = of_floats(xt, {2, 3, 5, 6}, uniform(2 * 3 * 5 * 6, 30, -2.0f, 2.0f));
  const Tensor grid = of_floats(gt, {2, 9, 7, 2}, grid_points());
  test::OneNode node("GridSampleGrad", {{"dy", dy}, {"x", x}, {"grid", grid}}, {xt, gt}, kAmpDomain);
  node.attr(Attribute::of_string("mode", mode));
  node.attr(Attribute::of_string("padding_mode", padding));
  node.attr(Attribute::of_int("align_corners", align));
  const std::vector<Tensor> want = node.run_cpu();
  emu::GridSampleShape s;
  s.batch = 2;
  s.channels = 3;
  s.height = 5;
  s.width = 6;
  s.out_h = 9;
  s.out_w = 7;
  s.mode = std::string(mode) == "bilinear" ? 0 : std::string(mode) == "nearest" ? 1 : 2;
  s.padding = std::string(padding) == "zeros" ? 0 : std::string(padding) == "border" ? 1 : 2;
  s.align_corners = align != 0;
  test::GuardedBuffer d(dy), in(x), points(grid), ws(emu::grid_sample_grad_workspace(s), 0x5a);
  for (int wanted = 0; wanted < 3; ++wanted) {  // both, dX alone, dGrid alone
    test::GuardedBuffer dx(want[0].nbytes(), 0xa5), dgrid(want[1].nbytes(), 0xa5);
    emu::grid_sample_grad(xt, gt, s, d.data(), in.data(), points.data(), wanted == 2 ? nullptr : dx.data(),
                          wanted == 1 ? nullptr : dgrid.data(), ws.data(), sm_count, nullptr);
    if (wanted != 2) {
      EXPECT_EQ(std::memcmp(dx.data(), want[0].data(), want[0].nbytes()), 0) << "dX differs from the CPU's";
    }
    if (wanted != 1) {
      EXPECT_EQ(std::memcmp(dgrid.data(), want[1].data(), want[1].nbytes()), 0) << "dGrid differs from the CPU's";
    }
  }
}

TEST(CudaKernelsEmulated, GridSampleGradMatchesTheCpuBitForBit) {
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* padding : {"zeros", "border", "reflection"})
        for (int align = 0; align < 2; ++align) expect_grad_like_cpu(t, t, mode, padding, align, 2);
  expect_grad_like_cpu(DType::kFloat16, DType::kFloat, "bicubic", "border", 1, 1);
}

TEST(CudaKernelsEmulated, GridSampleOfNoOutputsLaunchesNothing) {
  emu::GridSampleShape s;
  s.batch = 0;
  s.channels = 3;
  s.height = s.width = 4;
  s.out_h = s.out_w = 2;
  emu::grid_sample(DType::kFloat, DType::kFloat, s, nullptr, nullptr, nullptr, 2, nullptr);
}

}  // namespace
}  // namespace amp
