// quantize.cu on the fiber emulator (see cuda_kernels_emulated_test.cc for how the kernels run
// without a GPU) against the CPU backend's one-node QuantizeLinear and DequantizeLinear, byte for
// byte: x and scale in the three float types, uint8 and int8 with and without a zero point, int32
// dequantized, per tensor and per axis (the default axis 1, a last axis, a negative one), values
// at the halfway points (round half to even), beyond the range (saturation), NaN (0), more
// elements than the grid; the refusals of a scale that fits no axis.
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
#include "backends/cuda/quantize.cuh"
#undef cuda

namespace amp {
namespace {

namespace emu = cuda_emulated;

void put(Tensor& t, int64_t k, double v) {
  switch (t.dtype) {
    case DType::kFloat: t.mutable_as<float>()[k] = static_cast<float>(v); break;
    case DType::kFloat16: t.mutable_as<uint16_t>()[k] = fp32_to_fp16(static_cast<float>(v)); break;
    case DType::kBFloat16: t.mutable_as<uint16_t>()[k] = fp32_to_bf16(static_cast<float>(v)); break;
    case DType::kUInt8: t.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(v); break;
    case DType::kInt8: t.mutable_as<int8_t>()[k] = static_cast<int8_t>(v); break;
    case DType::kInt32: t.mutable_as<int32_t>()[k] = static_cast<int32_t>(v); break;
    default: throw std::logic_error("no such test type");
  }
}

// x drawn over [-spread, spread], with halfway points (k + 0.5 times the scale), NaN and values
// far beyond the quantized range among them.
Tensor floats(DType t, const std::vector<int64_t>& dims, uint32_t seed, float spread, float scale) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  for (int64_t k = 0; k < x.numel(); ++k) {
    double v = u(rng);
    if (k % 7 == 3) v = (std::floor(v / scale) + 0.5) * scale;
    if (k % 97 == 5) v = NAN;
    if (k % 53 == 9) v = 1e4 * (k % 2 ? 1 : -1);
    put(x, k, v);
  }
  return x;
}

Tensor filled(DType t, const std::vector<int64_t>& dims, const std::vector<double>& values) {
  Tensor x(t, dims);
  for (int64_t k = 0; k < x.numel(); ++k) put(x, k, values[static_cast<size_t>(k) % values.size()]);
  return x;
}

struct Layout {
  std::vector<int64_t> dims;
  int64_t axis;          // only set on the node when per_axis
  bool per_axis;
  std::string what;
};

TEST(CudaKernelsEmulated, QuantizeAndDequantizeMatchTheCpuByteForByte) {
  const Layout layouts[] = {{{2, 3, 4, 5}, 1, false, "per tensor"},
                            {{2, 3, 4, 5}, 1, true, "per channel (axis 1)"},
                            {{6, 7}, -1, true, "last axis, negative"},
                            {{3, 40, 50}, 1, true, "more elements than the grid"}};
  uint32_t seed = 70;
  for (const Layout& l : layouts)
    for (DType xt : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
      for (DType zt : {DType::kUInt8, DType::kInt8})
        for (bool with_zp : {false, true}) {
          if (!with_zp && zt == DType::kInt8) continue;  // without a zero point the output is uint8
          SCOPED_TRACE(l.what + " x " + std::string(dtype_name(xt)) + " to " + std::string(dtype_name(zt)) +
                       (with_zp ? " with a zero point" : ""));
          const int64_t channels = l.per_axis ? l.dims[static_cast<size_t>(l.axis < 0 ? l.axis + l.dims.size() : l.axis)] : 1;
          const std::vector<int64_t> sdims = l.per_axis ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
          const Tensor scale = filled(xt, sdims, {0.05, 0.125, 0.02, 0.5, 0.0625});
          const Tensor zp = filled(zt, sdims, zt == DType::kUInt8 ? std::vector<double>{128, 3, 250} : std::vector<double>{-5, 0, 100});
          const Tensor x = floats(xt, l.dims, seed++, 12.0f, 0.05f);
          test::Feeds qin = {{"x", x}, {"scale", scale}};
          if (with_zp) qin.push_back({"zp", zp});
          test::OneNode q("QuantizeLinear", qin, {zt});
          if (l.per_axis) q.attr(Attribute::of_int("axis", l.axis));
          const Tensor want_q = q.run_cpu()[0];
          const emu::QuantShape s = emu::quant_shape(l.dims, sdims, l.axis);
          test::GuardedBuffer bx(x), bs(scale), bz(zp), out_q(want_q.nbytes(), 0xa5);
          emu::quantize_linear(xt, xt, zt, s, bx.data(), bs.data(), with_zp ? bz.data() : nullptr, out_q.data(), 2,
                               nullptr);
          ASSERT_EQ(std::memcmp(out_q.data(), want_q.data(), want_q.nbytes()), 0) << "QuantizeLinear differs";

          // Back: the quantized values, and int32 values (a bias quantized by the tools) too.
          for (DType qt : {zt, DType::kInt32}) {
            const Tensor qx = qt == zt ? want_q : filled(DType::kInt32, l.dims, {-2147483647.0, 5, 70000, -3, 2147483647.0});
            const Tensor qzp = qt == zt ? zp : filled(DType::kInt32, sdims, {7, -9});
            test::Feeds din = {{"x", qx}, {"scale", scale}};
            if (with_zp) din.push_back({"zp", qzp});
            test::OneNode dq("DequantizeLinear", din, {xt});
            if (l.per_axis) dq.attr(Attribute::of_int("axis", l.axis));
            const Tensor want_d = dq.run_cpu()[0];
            test::GuardedBuffer bq(qx), bqz(qzp), out_d(want_d.nbytes(), 0xa5);
            emu::dequantize_linear(qt, xt, s, bq.data(), bs.data(), with_zp ? bqz.data() : nullptr, out_d.data(), 2,
                                   nullptr);
            ASSERT_EQ(std::memcmp(out_d.data(), want_d.data(), want_d.nbytes()), 0)
                << "DequantizeLinear from " << dtype_name(qt) << " differs";
          }
        }
}

TEST(CudaKernelsEmulated, QuantizationRefusesAScaleThatFitsNoAxis) {
  EXPECT_THROW(emu::quant_shape({2, 3, 4}, {4}, 1), InputError);
  EXPECT_THROW(emu::quant_shape({2, 3, 4}, {3, 1}, 1), InputError);
  EXPECT_THROW(emu::quant_shape({2, 3, 4}, {3}, 3), InputError);
  EXPECT_EQ(emu::quant_shape({2, 3, 4}, {4}, -1).inner, 1);
  EXPECT_EQ(emu::quant_shape({2, 3, 4}, {3}, 1).inner, 4);
  EXPECT_EQ(emu::quant_shape({2, 3, 4}, {1}, 1).extent, 1);
}

}  // namespace
}  // namespace amp
