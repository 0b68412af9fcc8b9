// Learning-rate schedules against their closed forms, evaluated here independently: linear warm-up
// base*(s+1)/W, then constant, cosine base*(1+cos(pi*p))/2 or linear base*(1-p) with
// p = (s-W)/(T-W).
#include <gtest/gtest.h>

#include <cmath>

#include "frontends/lib/lr_schedule.h"

namespace amp {
namespace {

TEST(LrSchedule, WarmupThenConstantCosineLinear) {
  LrSchedule s;
  s.base = 0.1;
  s.warmup = 4;
  s.total = 14;
  for (auto kind : {LrSchedule::Kind::kConstant, LrSchedule::Kind::kCosine, LrSchedule::Kind::kLinear}) {
    s.kind = kind;
    EXPECT_DOUBLE_EQ(s.at(0), 0.025);
    EXPECT_DOUBLE_EQ(s.at(3), 0.1);
    EXPECT_DOUBLE_EQ(s.at(4), 0.1);  // the first step after warm-up is at the base rate
  }
  s.kind = LrSchedule::Kind::kCosine;
  EXPECT_NEAR(s.at(9), 0.05, 1e-15);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(s.at(6), 0.1 * (1 + std::cos(M_PI * 0.2)) / 2, 1e-15);
  s.kind = LrSchedule::Kind::kLinear;
  EXPECT_NEAR(s.at(9), 0.05, 1e-15);
  EXPECT_NEAR(s.at(13), 0.01, 1e-15);
  s.kind = LrSchedule::Kind::kConstant;
  EXPECT_DOUBLE_EQ(s.at(13), 0.1);
  EXPECT_EQ(schedule_kind_from_name("cosine"), LrSchedule::Kind::kCosine);
  EXPECT_FALSE(schedule_kind_from_name("step").has_value());
}

}  // namespace
}  // namespace amp
