// log_sum_exp.cu on the fiber emulator against the CPU backend's one-node ReduceLogSumExp, in the
// three float types: the last axis, a middle one, all axes, alternating axes, groups larger than a
// block and more groups than the grid (both loops go round), values whose exp overflows fp32
// (the max shift's reason), groups of -inf, +inf and NaN terms, an empty reduced axis (-inf) and
// an empty output. Not bit for bit (log_sum_exp.cuh: the sum's order and expf/logf's last bits):
// fp32 within 4e-6 relative — the tree's and the CPU's sequential sums of a few thousand terms
// differ by less — and the 16-bit types within one unit of their last place; non-finite results
// exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/log_sum_exp.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

void put(Tensor& x, int64_t k, float v) {
  if (x.dtype == DType::kFloat) x.mutable_as<float>()[k] = v;
  else if (x.dtype == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v);
  else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v);
}

Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, float spread) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  for (int64_t k = 0; k < x.numel(); ++k) put(x, k, u(rng));
  return x;
}

struct Case {
  std::vector<int64_t> dims, axes;
  float spread;
};

TEST(CudaKernelsEmulated, ReduceLogSumExpMatchesTheCpu) {
  const Case cases[] = {{{4, 50}, {1}, 3.0f},              // the last axis
                        {{3, 7, 5}, {1}, 3.0f},            // a middle axis
                        {{2, 3, 4}, {0, 1, 2}, 3.0f},      // all axes: one output
                        {{2, 3, 4, 5}, {0, 2}, 3.0f},      // reduced, kept, reduced, kept
                        {{2, 3000}, {-1}, 5.0f},           // 3000 terms > 256 threads
                        {{40, 6}, {1}, 3.0f},              // 40 outputs > 16 blocks: the grid loop
                        {{3, 20}, {1}, 200.0f},            // exp(200) overflows fp32
                        {{3, 0}, {1}, 1.0f},               // an empty reduced axis: -inf
                        {{0, 5}, {1}, 1.0f}};              // no output
  uint32_t seed = 270;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " dims[0] " + std::to_string(c.dims[0]) + " axes " +
                   std::to_string(c.axes.size()) + " spread " + std::to_string(c.spread));
      Tensor x = drawn(t, c.dims, seed++, c.spread);
      if (c.dims == std::vector<int64_t>{3, 20}) {
        // Row 0 all -inf, row 1 with a +inf, row 2 with a NaN.
        for (int64_t k = 0; k < 20; ++k) put(x, k, -INFINITY);
        put(x, 27, INFINITY);
        put(x, 45, NAN);
      }
      test::OneNode node("ReduceLogSumExp", {{"x", x}}, {t});
      node.attr(Attribute::of_ints("axes", c.axes));
      const Tensor want = node.run_cpu()[0];
      const int64_t rank = static_cast<int64_t>(c.dims.size());
      std::vector<bool> reduced(c.dims.size(), false);
      for (int64_t a : c.axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
      test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
      emu::reduce_log_sum_exp(t, emu::axis_groups(c.dims, reduced), in.data(), out.data(), 2, nullptr);
      Tensor got(t, want.dims);
      if (want.nbytes()) std::memcpy(got.mutable_data(), out.data(), want.nbytes());
      const double rel = t == DType::kFloat ? 4e-6 : t == DType::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
      for (int64_t k = 0; k < want.numel(); ++k) {
        const double w = want.element(k), g = got.element(k);
        if (!std::isfinite(w)) {
          EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << "at " << k << ": " << g << " for " << w;
          continue;
        }
        EXPECT_NEAR(g, w, rel * std::max(1.0, std::fabs(w))) << "at " << k;
      }
    }
}

}  // namespace
}  // namespace amp
