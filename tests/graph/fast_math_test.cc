// graph/fast_math.h against the C library in double precision, rounded once to float: the error of
// amp_expf and amp_erff in units in the last place of the correctly rounded result, over every
// float in their ranges at a fine stride and at the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "graph/fast_math.h"

namespace amp {
namespace {

// Distance in representable floats between a and b (both finite, same sign or zero).
int64_t ulps_apart(float a, float b) {
  auto ordinal = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(ordinal(a) - ordinal(b));
}

// Every float from `lo` to `hi` whose bit pattern is a multiple of `stride` apart from lo's.
template <class F>
void sweep(float lo, float hi, uint32_t stride, F&& f) {
  for (float x = lo; x <= hi;) {
    f(x);
    uint32_t u;
    std::memcpy(&u, &x, 4);
    // Walk the bit patterns: toward zero for negatives, away from it for positives.
    if (x < 0) {
      if ((u & 0x7fffffffu) <= stride) {
        x = 0.0f;
        continue;
      }
      u -= stride;
    } else {
      u += stride;
    }
    std::memcpy(&x, &u, 4);
  }
}

// The largest distance of f from libm's double result rounded to float over a sweep, and where.
struct Worst {
  int64_t ulps = 0;
  float at = 0;
  int64_t checked = 0;
};
template <class F, class G>
Worst worst_ulps(float lo, float hi, uint32_t stride, F&& f, G&& reference) {
  Worst w;
  sweep(lo, hi, stride, [&](float x) {
    const int64_t d = ulps_apart(f(x), static_cast<float>(reference(static_cast<double>(x))));
    if (d > w.ulps) w.ulps = d, w.at = x;
    ++w.checked;
  });
  return w;
}

TEST(FastMath, ExpIsWithinOneUlpOfTheCorrectlyRoundedResult) {
  const Worst w = worst_ulps(-87.3f, 88.72f, 97, amp_expf, [](double x) { return std::exp(x); });
  EXPECT_GT(w.checked, 10000000);
  EXPECT_LE(w.ulps, 1) << "at x = " << w.at;
}

TEST(FastMath, ExpOfSpecialValuesAndSubnormalResults) {
  EXPECT_TRUE(std::isnan(amp_expf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(amp_expf(INFINITY), INFINITY);
  EXPECT_EQ(amp_expf(-INFINITY), 0.0f);
  EXPECT_EQ(amp_expf(0.0f), 1.0f);
  EXPECT_EQ(amp_expf(-0.0f), 1.0f);
  EXPECT_EQ(amp_expf(89.0f), INFINITY);
  EXPECT_EQ(amp_expf(-105.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(amp_expf(88.72f)));
  // Subnormal results: within two of the smallest subnormal steps (2^-149), the scaling's second
  // rounding included.
  for (float x = -103.9f; x < -87.4f; x += 0.013f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(amp_expf(x), want, 2 * std::ldexp(1.0, -149) + want * 1.2e-7) << "x = " << x;
  }
}

TEST(FastMath, ErfIsWithinTwoUlpsOfTheCorrectlyRoundedResult) {
  const Worst w = worst_ulps(-5.0f, 5.0f, 61, amp_erff, [](double x) { return std::erf(x); });
  EXPECT_GT(w.checked, 10000000);
  EXPECT_LE(w.ulps, 2) << "at x = " << w.at;
}

TEST(FastMath, ErfOfSpecialValues) {
  EXPECT_TRUE(std::isnan(amp_erff(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(amp_erff(INFINITY), 1.0f);
  EXPECT_EQ(amp_erff(-INFINITY), -1.0f);
  EXPECT_EQ(amp_erff(1e30f), 1.0f);
  EXPECT_EQ(amp_erff(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(amp_erff(-0.0f)));
  EXPECT_LE(ulps_apart(amp_erff(1e-30f), static_cast<float>(std::erf(static_cast<double>(1e-30f)))), 1);
  // A subnormal argument: its result is subnormal too, within one step of 2^-149.
  EXPECT_LE(ulps_apart(amp_erff(-1e-40f), static_cast<float>(std::erf(static_cast<double>(-1e-40f)))), 1);
}

// The exp(-x^2) erf hands out beside its result (GELU's gradient reads it): within two ulps of
// the correctly rounded exp(-x^2) of the float x (x^2 taken exactly) while it is normal, within
// two steps of 2^-149 where it is subnormal, 0 once it underflows and for NaN; the erf beside it
// is amp_erff's, bit for bit.
TEST(FastMath, ErfHandsOutTheExpOfMinusXSquaredItComputes) {
  int64_t checked = 0, worst = 0;
  float worst_at = 0;
  sweep(-10.3f, 10.3f, 61, [&](float x) {
    float e = -1.0f;
    const float y = amp_erff_with_exp(x, &e);
    EXPECT_EQ(ulps_apart(y, amp_erff(x)), 0) << "x = " << x;
    const double want = std::exp(-static_cast<double>(x) * static_cast<double>(x));
    if (want >= std::numeric_limits<float>::min()) {
      const int64_t d = ulps_apart(e, static_cast<float>(want));
      if (d > worst) worst = d, worst_at = x;
    } else {
      EXPECT_NEAR(e, want, 2 * std::ldexp(1.0, -149)) << "x = " << x;
    }
    ++checked;
  });
  EXPECT_GT(checked, 1000000);
  EXPECT_LE(worst, 2) << "at x = " << worst_at;
  for (float x : {10.2f, -11.0f, 1e20f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN()}) {
    float e = -1.0f;
    amp_erff_with_exp(x, &e);
    EXPECT_EQ(e, 0.0f) << "x = " << x;
  }
  float e = -1.0f;
  amp_erff_with_exp(0.0f, &e);
  EXPECT_EQ(e, 1.0f);
}

TEST(FastMath, TheCudaSourceSpellsTheSameFunctions) {
  const std::string text = fast_math_source();
  for (const char* piece : {"__device__ __forceinline__ float amp_expf(float x)",
                            "__device__ __forceinline__ float amp_erff(float x)",
                            "__device__ __forceinline__ float amp_erff_with_exp(float x, float* e)", "__float_as_uint",
                            "__uint_as_float"})
    EXPECT_NE(text.find(piece), std::string::npos) << piece;
}

}  // namespace
}  // namespace amp
