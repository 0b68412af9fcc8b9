// The CPU backend's AllReduce kernel (backends/cpu/all_reduce.cc) between two ranks in two threads
// (tests/support/thread_communicator.h): fp32, fp16, bf16 and fp64 inputs in one bucket, each
// output the mean of the ranks' values summed in fp32 (fp64 for double) and rounded once to its
// type (graph/half.h's rounding, itself checked against numpy and torch); identical bits on both
// ranks; one exchange per run, none with `reduce` false (outputs then the inputs) and none in a
// single process.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "graph/half.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/thread_communicator.h"

namespace amp {
namespace {

const std::vector<DType> kTypes = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble};

Tensor flag(bool v) {
  Tensor t(DType::kBool, {});
  *t.mutable_as<bool>() = v;
  return t;
}

// The inputs of rank r: one tensor per type, different values per rank; r 0 has specials.
test::Feeds inputs(int r, bool gate, bool reduce) {
  test::Feeds f;
  if (gate) f.emplace_back("reduce", flag(reduce));
  for (size_t k = 0; k < kTypes.size(); ++k) {
    Tensor x = kTypes[k] == DType::kDouble ? Tensor(DType::kDouble, {37})
                                           : test::random_tensor(kTypes[k], {37}, 10 * static_cast<uint32_t>(r) + k, -3, 3);
    if (kTypes[k] == DType::kDouble)
      for (int64_t i = 0; i < 37; ++i) x.mutable_as<double>()[i] = (r + 1) * 0.1 * static_cast<double>(i) - 1.7;
    f.emplace_back("x" + std::to_string(k), std::move(x));
  }
  return f;
}

// The mean of two ranks' element as the kernel promises it: summed in fp32 (fp64), rounded once.
double mean(DType t, double a, double b) {
  if (t == DType::kDouble) return (a + b) / 2;
  const float m = (static_cast<float>(a) + static_cast<float>(b)) / 2.0f;
  if (t == DType::kFloat16) return fp16_to_fp32(fp32_to_fp16(m));
  if (t == DType::kBFloat16) return bf16_to_fp32(fp32_to_bf16(m));
  return m;
}

// Runs the node on two ranks at once; returns each rank's outputs and exchanges.
std::vector<std::vector<Tensor>> run_two(bool gate, bool reduce, std::vector<int>* sums) {
  auto ranks = test::thread_ranks(2);
  std::vector<std::vector<Tensor>> out(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      test::Feeds f = inputs(r, gate, reduce);
      test::Feeds named = f;
      if (!gate) named.insert(named.begin(), {"", Tensor()});  // the absent reduce input
      test::OneNode node("AllReduce", named, kTypes, kAmpDomain);
      CompileOptions o;
      o.communicator = ranks[static_cast<size_t>(r)];
      out[static_cast<size_t>(r)] = make_backend("cpu")->compile(node.m, o)->run(node.feeds, node.outputs);
    });
  for (auto& t : threads) t.join();
  *sums = {ranks[0]->sums(), ranks[1]->sums()};
  return out;
}

TEST(CpuAllReduce, MeansOfEveryFloatTypeSummedWideAndRoundedOnceTheSameOnEveryRank) {
  std::vector<int> sums;
  const auto out = run_two(false, false, &sums);
  EXPECT_EQ(sums, (std::vector<int>{2, 2}));  // one bucket: an fp32 and an fp64 sum
  const test::Feeds a = inputs(0, false, false), b = inputs(1, false, false);
  for (size_t k = 0; k < kTypes.size(); ++k) {
    ASSERT_EQ(out[0][k].dtype, kTypes[k]);
    EXPECT_TRUE(out[0][k].same_contents(out[1][k])) << dtype_name(kTypes[k]);
    for (int64_t i = 0; i < 37; ++i)
      EXPECT_EQ(out[0][k].element(i), mean(kTypes[k], a[k].second.element(i), b[k].second.element(i)))
          << dtype_name(kTypes[k]) << "[" << i << "]";
  }
}

TEST(CpuAllReduce, ReduceFalseExchangesNothingAndPassesTheInputsOn) {
  std::vector<int> sums;
  const auto out = run_two(true, false, &sums);
  EXPECT_EQ(sums, (std::vector<int>{0, 0}));
  for (int r = 0; r < 2; ++r) {
    const test::Feeds f = inputs(r, true, false);
    for (size_t k = 0; k < kTypes.size(); ++k) EXPECT_TRUE(out[static_cast<size_t>(r)][k].same_contents(f[k + 1].second));
  }
  const auto reduced = run_two(true, true, &sums);
  EXPECT_EQ(sums, (std::vector<int>{2, 2}));
  EXPECT_TRUE(reduced[0][0].same_contents(reduced[1][0]));
}

TEST(CpuAllReduce, OneProcessPassesTheInputsOn) {
  test::Feeds named = inputs(0, false, false);
  const test::Feeds f = named;
  named.insert(named.begin(), {"", Tensor()});
  test::OneNode node("AllReduce", named, kTypes, kAmpDomain);
  const std::vector<Tensor> out = node.run_cpu();
  for (size_t k = 0; k < kTypes.size(); ++k) EXPECT_TRUE(out[k].same_contents(f[k].second)) << dtype_name(kTypes[k]);
}

}  // namespace
}  // namespace amp
