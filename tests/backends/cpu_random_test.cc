// The CPU backend's random generators (backends/cpu/random.cc): no reference can match their
// elements (ONNX Runtime draws from another generator), so these check what ONNX asks of them:
// the distribution (mean, spread, range; Bernoulli's frequency per probability, against the
// binomial's own spread), the shape and type from the attributes or the input, a new draw on every
// run (none is computed once per plan, as nodes without inputs are), the same draws for the same
// CompileOptions::seed whatever the thread count, and nodes with different seeds drawing apart.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "graph/half.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

namespace amp {
namespace {

using test::OneNode;

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == DType::kFloat) v[i] = t.as<float>()[i];
    else if (t.dtype == DType::kDouble) v[i] = t.as<double>()[i];
    else if (t.dtype == DType::kFloat16) v[i] = fp16_to_fp32(t.as<uint16_t>()[i]);
    else ADD_FAILURE() << "unexpected type";
  }
  return v;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double stddev(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

std::vector<Tensor> runs(const OneNode& one, int count, uint64_t seed = 7, int threads = 1) {
  CompileOptions o;
  o.seed = seed;
  o.threads = threads;
  auto exe = make_backend("cpu")->compile(one.m, o);
  std::vector<Tensor> out;
  for (int k = 0; k < count; ++k) out.push_back(exe->run(one.feeds, one.outputs)[0]);
  return out;
}

TEST(CpuRandom, NormalAndUniformHaveTheirDistributionShapeAndType) {
  const int64_t n = 200000;
  {
    OneNode one("RandomNormal", {}, {DType::kFloat});
    one.attr(Attribute::of_ints("shape", {400, 500})).attr(Attribute::of_float("mean", 2.0f)).attr(Attribute::of_float("scale", 1.5f));
    const Tensor y = runs(one, 1)[0];
    EXPECT_EQ(y.dims, (std::vector<int64_t>{400, 500}));
    const std::vector<double> v = values(y);
    // The sample mean's own spread is 1.5 / sqrt(n) = 0.0034; 5 of those.
    EXPECT_NEAR(mean(v), 2.0, 0.017);
    EXPECT_NEAR(stddev(v), 1.5, 0.012);
    int beyond3 = 0;  // N(0,1) beyond 3 sigma: 0.27%
    for (double x : v) beyond3 += std::fabs(x - 2.0) > 4.5;
    EXPECT_NEAR(beyond3 / static_cast<double>(n), 0.0027, 0.0006);
  }
  {
    OneNode one("RandomUniform", {}, {DType::kDouble});
    one.attr(Attribute::of_ints("shape", {n})).attr(Attribute::of_float("low", -3.0f)).attr(Attribute::of_float("high", 5.0f));
    one.attr(Attribute::of_int("dtype", static_cast<int64_t>(DType::kDouble)));
    const std::vector<double> v = values(runs(one, 1)[0]);
    double lo = 1e9, hi = -1e9;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, -3.0);
    EXPECT_LT(hi, 5.0);
    EXPECT_LT(lo, -2.99);
    EXPECT_GT(hi, 4.99);
    EXPECT_NEAR(mean(v), 1.0, 5 * 8 / std::sqrt(12.0 * n));
    EXPECT_NEAR(stddev(v), 8 / std::sqrt(12.0), 0.02);
  }
  {  // the Like forms: the input's shape, its type unless dtype names another
    OneNode like("RandomNormalLike", {{"x", test::random_tensor(DType::kFloat16, {3, 7}, 1)}}, {DType::kFloat16});
    EXPECT_EQ(runs(like, 1)[0].dims, (std::vector<int64_t>{3, 7}));
    EXPECT_EQ(runs(like, 1)[0].dtype, DType::kFloat16);
    OneNode typed("RandomUniformLike", {{"x", test::random_tensor(DType::kFloat16, {4, 2}, 2)}}, {DType::kDouble});
    typed.attr(Attribute::of_int("dtype", static_cast<int64_t>(DType::kDouble)));
    EXPECT_EQ(runs(typed, 1)[0].dtype, DType::kDouble);
  }
}

TEST(CpuRandom, BernoulliDrawsOnesAtEachProbability) {
  const int64_t per = 20000;
  const std::vector<float> ps = {0.0f, 0.1f, 0.5f, 0.93f, 1.0f};
  Tensor p(DType::kFloat, {static_cast<int64_t>(ps.size()), per});
  for (size_t k = 0; k < ps.size(); ++k)
    for (int64_t i = 0; i < per; ++i) p.mutable_as<float>()[k * per + i] = ps[k];
  OneNode one("Bernoulli", {{"p", p}}, {DType::kFloat});
  const std::vector<double> v = values(runs(one, 1)[0]);
  for (size_t k = 0; k < ps.size(); ++k) {
    double ones = 0;
    for (int64_t i = 0; i < per; ++i) {
      const double x = v[k * per + i];
      ASSERT_TRUE(x == 0.0 || x == 1.0);
      ones += x;
    }
    const double spread = std::sqrt(ps[k] * (1 - ps[k]) / per);
    EXPECT_NEAR(ones / per, ps[k], 5 * spread + 1e-12) << "p " << ps[k];
  }
}

TEST(CpuRandom, EveryRunDrawsAnewTheSameForTheSameSeedAndAnyThreads) {
  OneNode one("RandomNormal", {}, {DType::kFloat});
  one.attr(Attribute::of_ints("shape", {64, 300}));
  const std::vector<Tensor> a = runs(one, 2, 7, 1), b = runs(one, 2, 7, 2), c = runs(one, 1, 8, 1);
  EXPECT_NE(values(a[0]), values(a[1])) << "a node without inputs was computed once per plan";
  EXPECT_EQ(values(a[0]), values(b[0]));
  EXPECT_EQ(values(a[1]), values(b[1]));
  EXPECT_NE(values(a[0]), values(c[0]));
  OneNode seeded("RandomNormal", {}, {DType::kFloat});
  seeded.attr(Attribute::of_ints("shape", {64, 300})).attr(Attribute::of_float("seed", 3.0f));
  EXPECT_NE(values(runs(seeded, 1)[0]), values(a[0])) << "the seed attribute changes the draws";
}

}  // namespace
}  // namespace amp
