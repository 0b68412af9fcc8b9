// float_class.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU) against the CPU backend's one-node IsNaN and IsInf, bit for bit, in float,
// float16, bfloat16 and double: NaNs of both signs, both infinities, the largest finite values
// (one ulp short of infinity), subnormals and zeros of both signs, and ordinary values; IsInf with
// each choice of signs; more elements than the emulated grid's 4096 threads; an empty tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/cuda_emulator.h"
#include "tests/support/guarded_buffer.h"
#include "tests/support/one_node.h"

#define cuda cuda_emulated
#include "backends/cuda/float_class.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

// n elements cycling through the special values, the rest random; each rounded to t (the 16-bit
// types get their own largest finite values: fp32's largest rounds to infinity there).
Tensor specials(DType t, int64_t n, uint32_t seed) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double largest = t == DType::kDouble    ? std::numeric_limits<double>::max()
                         : t == DType::kFloat   ? std::numeric_limits<float>::max()
                         : t == DType::kFloat16 ? 65504.0
                                                : 3.3895313892515355e38;  // bf16's
  const double tiny = t == DType::kDouble ? 4.9e-324 : t == DType::kFloat16 ? 5.96e-8 : 1.4e-45;
  const double special[] = {nan, -nan, inf, -inf, largest, -largest, tiny, -tiny, 0.0, -0.0, 1.5, -3.25};
  Tensor x(t, {n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1e4, 1e4);
  for (int64_t k = 0; k < n; ++k) {
    const double v = k % 3 == 0 ? special[(k / 3) % 12] : u(rng);
    if (t == DType::kDouble) x.mutable_as<double>()[k] = v;
    else if (t == DType::kFloat) x.mutable_as<float>()[k] = static_cast<float>(v);
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(static_cast<float>(v));
    else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(static_cast<float>(v));
  }
  return x;
}

TEST(CudaKernelsEmulated, IsNaNAndIsInfMatchTheCpuBitForBit) {
  uint32_t seed = 90;
  for (int64_t n : {int64_t{36}, int64_t{5000}, int64_t{0}})
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      const Tensor x = specials(t, n, seed++);
      struct Test {
        const char* op;
        int positive, negative;
      };
      for (const Test& c : {Test{"IsNaN", 1, 1}, Test{"IsInf", 1, 1}, Test{"IsInf", 1, 0}, Test{"IsInf", 0, 1},
                            Test{"IsInf", 0, 0}}) {
        SCOPED_TRACE(std::string(c.op) + " " + std::string(dtype_name(t)) + " positive " + std::to_string(c.positive) +
                     " negative " + std::to_string(c.negative) + " n " + std::to_string(n));
        test::OneNode node(c.op, {{"x", x}}, {DType::kBool});
        if (std::string(c.op) == "IsInf") {
          node.attr(Attribute::of_int("detect_positive", c.positive));
          node.attr(Attribute::of_int("detect_negative", c.negative));
        }
        const Tensor want = node.run_cpu()[0];
        emu::FloatClassTest test;
        test.nan = std::string(c.op) == "IsNaN";
        test.positive = c.positive != 0;
        test.negative = c.negative != 0;
        test::GuardedBuffer in(x), out(want.nbytes(), 0xa5);
        emu::float_class(t, test, in.data(), static_cast<bool*>(out.data()), n, 2, nullptr);
        if (want.nbytes()) {
          EXPECT_EQ(std::memcmp(out.data(), want.data(), want.nbytes()), 0) << "differs from the CPU kernel";
        }
      }
    }
}

TEST(CudaKernelsEmulated, IsNaNRefusesIntegers) {
  EXPECT_THROW(emu::float_class(DType::kInt32, {}, nullptr, nullptr, 4, 2, nullptr), InputError);
}

}  // namespace
}  // namespace amp
