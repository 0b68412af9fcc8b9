// fp16/bf16 conversion against numpy (fp16) and torch (bf16): all 65,536 patterns widened, and
// narrowing of every pattern, every tie between neighbours, the values one ulp either side of each
// tie, overflow edges, NaNs and random floats.
#include "graph/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tests/support/test_support.h"

namespace amp {
namespace {

template <class T>
std::vector<T> load(const std::string& path) {
  std::string bytes = test::read_file(path);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

class HalfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::temp_dir("half");
    std::string out;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/graph/half_reference.py " + dir_, &out), 0) << out;
  }
  static std::string dir_;
};
std::string HalfTest::dir_;

bool both_nan(uint16_t a, uint16_t b, uint16_t exp_mask) {
  // NaN payloads differ between libraries (torch 1.13 makes every bf16 NaN 0xffff); NaN-ness may not.
  auto is_nan = [&](uint16_t h) { return (h & exp_mask) == exp_mask && (h & ~exp_mask & 0x7fff); };
  return is_nan(a) && is_nan(b);
}

TEST_F(HalfTest, WidenAllFp16PatternsLikeNumpy) {
  auto ref = load<float>(dir_ + "/fp16_to_f32.bin");
  ASSERT_EQ(ref.size(), 65536u);
  for (uint32_t b = 0; b < 65536; ++b) {
    float got = fp16_to_fp32(static_cast<uint16_t>(b));
    if (std::isnan(ref[b])) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
      EXPECT_EQ(std::signbit(got), std::signbit(ref[b])) << std::hex << b;
    } else {
      EXPECT_EQ(float_bits(got), float_bits(ref[b])) << "pattern 0x" << std::hex << b;
    }
  }
}

TEST_F(HalfTest, WidenAllBf16PatternsIsExact) {
  for (uint32_t b = 0; b < 65536; ++b) EXPECT_EQ(float_bits(bf16_to_fp32(static_cast<uint16_t>(b))), b << 16);
}

TEST_F(HalfTest, NarrowToFp16LikeNumpy) {
  auto x = load<float>(dir_ + "/f32_inputs.bin");
  auto ref = load<uint16_t>(dir_ + "/fp16_bits.bin");
  ASSERT_EQ(x.size(), ref.size());
  ASSERT_GT(x.size(), 400000u);
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t got = fp32_to_fp16(x[i]);
    if (got != ref[i] && !both_nan(got, ref[i], 0x7c00)) {
      if (++bad < 10) ADD_FAILURE() << "x=" << x[i] << " (0x" << std::hex << float_bits(x[i]) << ") got 0x" << got
                                    << " numpy 0x" << ref[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(HalfTest, NarrowToBf16LikeTorch) {
  auto x = load<float>(dir_ + "/f32_inputs.bin");
  auto ref = load<uint16_t>(dir_ + "/bf16_bits.bin");
  ASSERT_EQ(x.size(), ref.size());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t got = fp32_to_bf16(x[i]);
    if (got != ref[i] && !both_nan(got, ref[i], 0x7f80)) {
      if (++bad < 10) ADD_FAILURE() << "x=" << x[i] << " (0x" << std::hex << float_bits(x[i]) << ") got 0x" << got
                                    << " torch 0x" << ref[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(HalfEdges, NanStaysQuietNanNotInf) {
  const float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(nan))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(bits_float(0x7f800001u)))));  // signalling payload in low bits
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(bits_float(0x7f800001u)))));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(fp32_to_fp16(-nan))));  // the sign survives, as on a GPU
}

}  // namespace
}  // namespace amp
