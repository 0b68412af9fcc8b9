// arg_extremum.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU) against the CPU backend's one-node ArgMax / ArgMin (itself checked against ONNX's
// node tests, test_argmax_* and test_argmin_*), index for index, in the three float types: the
// block-per-lane path (the last axis; long lanes take 512 threads, short ones 128) and the
// thread-per-lane path (an inner axis), ties to the first or with select_last_index the last
// index, NaNs (the first or last NaN wins), values that tie only once rounded to 16 bits, an axis
// of one element, and a lane count beyond one launch's threads so the loop goes round.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

#define cuda cuda_emulated
#include "backends/cuda/arg_extremum.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

// Values drawn from a few levels, so that lanes have ties, with NaNs planted at `nan_every`.
Tensor drawn(DType t, const std::vector<int64_t>& dims, uint32_t seed, int64_t nan_every) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-6, 6);
  std::uniform_real_distribution<float> fine(0.0f, 1e-3f);  // ties once rounded to bf16 / fp16, not in fp32
  for (int64_t k = 0; k < x.numel(); ++k) {
    float v = static_cast<float>(level(rng)) + (t == DType::kFloat ? 0.0f : fine(rng));
    if (nan_every > 0 && k % nan_every == nan_every / 2) v = std::nanf("");
    test::put_float(x, k, v);
  }
  return x;
}

struct Case {
  std::vector<int64_t> dims;
  int64_t axis;
  int64_t nan_every;  // 0: none
};

TEST(CudaKernelsEmulated, ArgMaxAndArgMinMatchTheCpuIndexForIndex) {
  const Case cases[] = {
      {{6, 3000}, -1, 0},     // long lanes: 512 threads each
      {{9, 3001}, -1, 211},   // rows at every 16-byte phase: a head, vector loads, a tail
      {{5, 7, 40}, 2, 0},     // short lanes: 128 threads
      {{4, 9, 50}, 2, 97},    // NaNs in some lanes
      {{3, 11, 5}, 1, 0},     // an inner axis: a thread per lane
      {{2, 13, 6}, 1, 29},    // NaNs along inner lanes
      {{3, 1, 4}, 1, 0},      // one element per lane
      {{70000, 3, 2}, 1, 0},  // more lanes than one launch's threads
      {{2, 20011}, -1, 0},     // lanes past 4 vector loads a thread: loads issued 4 ahead (for_row)
      {{3, 20011}, -1, 4999},  // the same with NaNs
  };
  uint32_t seed = 70;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
      for (const char* op : {"ArgMax", "ArgMin"})
        for (int last : {0, 1}) {
          const size_t rank = c.dims.size(), a = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int64_t>(rank) : c.axis);
          SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(t)) + " axis " + std::to_string(c.axis) +
                       " select_last_index " + std::to_string(last) + " lanes of " + std::to_string(c.dims[a]));
          const Tensor x = drawn(t, c.dims, seed++, c.nan_every);
          test::OneNode node(op, {{"x", x}}, {DType::kInt64});
          node.attr(Attribute::of_int("axis", c.axis));
          node.attr(Attribute::of_int("keepdims", 1));
          node.attr(Attribute::of_int("select_last_index", last));
          const Tensor want = node.run_cpu()[0];
          emu::ArgExtremumShape s;
          s.max = std::string(op) == "ArgMax";
          s.last = last != 0;
          s.r = c.dims[a];
          for (size_t d = 0; d < a; ++d) s.outer *= c.dims[d];
          for (size_t d = a + 1; d < rank; ++d) s.inner *= c.dims[d];
          test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
          emu::arg_extremum(t, s, in.data(), static_cast<int64_t*>(out.data()), nullptr);
          const int64_t* got = static_cast<const int64_t*>(out.data());
          int64_t bad = 0;
          for (int64_t k = 0; k < want.numel(); ++k)
            if (got[k] != want.as<int64_t>()[k] && bad++ < 5)
              ADD_FAILURE() << "lane " << k << ": " << got[k] << ", cpu " << want.as<int64_t>()[k];
          EXPECT_EQ(bad, 0);
        }
}

// Hardmax = ArgMax (max, first) into a workspace, then one_hot_at: against the CPU's Hardmax bit for
// bit, the last axis (a block per lane) and an inner one (a thread per lane), ties, NaNs, more
// elements than the one-hot pass's grid (the loop goes round).
TEST(CudaKernelsEmulated, HardmaxMatchesTheCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis, nan_every;
  };
  const Case cases[] = {{{5, 40}, -1, 0}, {{3, 7, 6}, 1, 11}, {{2, 3, 4}, 0, 5}, {{4, 1}, -1, 0}, {{8, 600}, 1, 97}};
  uint32_t seed = 90;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " dims[0] " + std::to_string(c.dims[0]) + " axis " + std::to_string(c.axis));
      const Tensor x = drawn(t, c.dims, seed++, c.nan_every);
      test::OneNode node("Hardmax", {{"x", x}}, {t});
      node.attr(Attribute::of_int("axis", c.axis));
      const Tensor want = node.run_cpu()[0];
      const int64_t rank = static_cast<int64_t>(c.dims.size());
      const size_t a = static_cast<size_t>(c.axis < 0 ? c.axis + rank : c.axis);
      emu::ArgExtremumShape s;
      s.r = c.dims[a];
      for (size_t d = 0; d < a; ++d) s.outer *= c.dims[d];
      for (size_t d = a + 1; d < c.dims.size(); ++d) s.inner *= c.dims[d];
      test::GuardedBuffer in(x), at(static_cast<size_t>(s.outer * s.inner) * 8, 0xa5), out(want.nbytes(), 0xa5);
      emu::arg_extremum(t, s, in.data(), static_cast<int64_t*>(at.data()), nullptr);
      emu::one_hot_at(t, s, static_cast<const int64_t*>(at.data()), out.data(), 2, nullptr);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
    }
}

}  // namespace
}  // namespace amp
