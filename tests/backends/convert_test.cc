// The kernels' bulk fp16/bf16 conversions (F16C where the CPU has it) against graph/half.h, which
// is itself tested against numpy and torch: every 16-bit pattern widened; narrowing of every float
// whose fp16 result is subnormal or zero-adjacent, and of the neighbourhood of every rounding tie
// in the normal range; odd lengths, so the 8-wide tail path runs too.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/convert.h"
#include "backends/cpu/kernel_util.h"
#include "graph/half.h"

namespace amp::cpu {
namespace {

TEST(BulkConvert, WidensEvery16BitPatternLikeHalfH) {
  std::vector<f16> h(65536 + 5);
  std::vector<bf16> b(h.size());
  for (size_t i = 0; i < h.size(); ++i) h[i].bits = b[i].bits = static_cast<uint16_t>(i);
  std::vector<float> fh(h.size()), fb(h.size());
  widen(h.data(), fh.data(), static_cast<int64_t>(h.size()));
  widen(b.data(), fb.data(), static_cast<int64_t>(b.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const uint32_t want = float_bits(fp16_to_fp32(h[i].bits));
    const bool nan = (h[i].bits & 0x7c00) == 0x7c00 && (h[i].bits & 0x3ff);
    // F16C quiets a signalling NaN (sets the top payload bit); half.h passes it through.
    EXPECT_EQ(float_bits(fh[i]) | (nan ? 0x400000u : 0u), want | (nan ? 0x400000u : 0u)) << std::hex << i;
    EXPECT_EQ(float_bits(fb[i]), float_bits(bf16_to_fp32(b[i].bits))) << std::hex << i;
  }
}

// Narrows `in` both ways and counts disagreements with half.h, reporting the first few.
size_t narrow_mismatches(const std::vector<float>& in) {
  std::vector<f16> h(in.size());
  std::vector<bf16> b(in.size());
  narrow(in.data(), h.data(), static_cast<int64_t>(in.size()));
  narrow(in.data(), b.data(), static_cast<int64_t>(in.size()));
  size_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (h[i].bits == fp32_to_fp16(in[i]) && b[i].bits == fp32_to_bf16(in[i])) continue;
    if (bad++ < 5)
      ADD_FAILURE() << std::hex << float_bits(in[i]) << ": fp16 " << h[i].bits << " vs " << fp32_to_fp16(in[i])
                    << ", bf16 " << b[i].bits << " vs " << fp32_to_bf16(in[i]);
  }
  return bad;
}

TEST(BulkConvert, NarrowsLikeHalfHAtEveryKindOfRounding) {
  // Every float of exponent 102..113, both signs: all fp16 subnormals, their ties, and the
  // smallest normal. One exponent at a time, with an odd length for the tail path.
  std::vector<float> in;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 102; e < 114; ++e) {
      in.clear();
      for (uint32_t m = 0; m < (1u << 23); ++m) in.push_back(bits_float(sign | e << 23 | m));
      in.push_back(bits_float(sign | (e + 1) << 23));
      ASSERT_EQ(narrow_mismatches(in), 0u) << "exponent " << e;
    }
  // Each fp32 high part (sign, exponent, top 10 mantissa bits) with the low 13 bits just below,
  // at and above the tie: the whole normal range, infinities and NaNs.
  in.clear();
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu}) in.push_back(bits_float(high << 13 | low));
  in.pop_back();
  EXPECT_EQ(narrow_mismatches(in), 0u);
}

}  // namespace
}  // namespace amp::cpu

namespace amp::cpu {
namespace {

// The scalar fp16 load (numeric.h's compile-time table) against half.h's conversion, bit for bit,
// for every pattern: normals, subnormals, zeros, infinities and NaN payloads.
TEST(BulkConvert, ScalarFp16LoadsEvery16BitPatternLikeHalfH) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float loaded = load(f16{static_cast<uint16_t>(h)});
    ASSERT_EQ(float_bits(loaded), float_bits(fp16_to_fp32(static_cast<uint16_t>(h)))) << "fp16 bits " << h;
  }
}

// fp64 values rounded once to fp16/bf16 through store_rows' fp32 block (round to odd, then the
// vector narrowing) give what convert<T>(double) gives, ties and near-ties included.
TEST(BulkConvert, StoreRowsRoundsDoublesOnceLikeConvert) {
  std::vector<double> values;
  for (uint32_t h = 0x0001; h < 0x7c00; h += 7) {  // around fp16 values: exact, ties, a hair off ties
    const double v = fp16_to_fp32(static_cast<uint16_t>(h)), next = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const double mid = (v + next) / 2;
    for (double x : {v, mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9), -mid}) values.push_back(x);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<f16> h(values.size());
  std::vector<bf16> b(values.size());
  store_rows<f16>(h.data(), n, [&](int64_t j) { return values[j]; });
  store_rows<bf16>(b.data(), n, [&](int64_t j) { return values[j]; });
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(h[j].bits, convert<f16>(values[j]).bits) << values[j];
    ASSERT_EQ(b[j].bits, convert<bf16>(values[j]).bits) << values[j];
  }
}

}  // namespace
}  // namespace amp::cpu
