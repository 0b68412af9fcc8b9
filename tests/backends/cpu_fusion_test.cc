// The CPU backend's elementwise fusion (backends/cpu/fused_steps.h, fused_elementwise.cc) changes
// no result: the models/ training steps in fp32, fp16 and bf16 (AdamW, the inf/NaN check, dynamic
// loss scaling for fp16: Casts, comparisons, Where and optimizer arithmetic to fuse), run fused and
// op by op from the same state and feeds, give the same losses and the same state, bit for bit,
// after several steps. And the fusion takes place: each step has fused groups.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/fused_steps.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/parity.h"

namespace amp::test {
namespace {

class CpuFusion : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CpuFusion, TrainingStepsGiveTheSameBitsFusedAndOpByOp) {
  const auto& [file, precision] = GetParam();
  const TrainingStep step = mixed_precision_step(file, precision);

  // The fusion finds groups in this step.
  std::vector<const Node*> nodes;
  Program p = make_program(step.model, &nodes);
  const size_t steps_before = p.steps.size();
  std::vector<std::optional<cpu::FusedStep>> fused;
  std::vector<int> origin;
  std::vector<std::string> keep;
  for (const auto& [state, source] : step.updates) keep.push_back(source);
  cpu::fuse_elementwise_steps(step.model, keep, p, nodes, fused, origin);
  const auto groups = std::count_if(fused.begin(), fused.end(), [](const auto& f) { return f.has_value(); });
  EXPECT_GT(groups, 0);
  EXPECT_LT(p.steps.size(), steps_before);

  auto backend = make_backend("cpu");
  CompileOptions on = step_options(step), off = step_options(step);
  on.threads = off.threads = 2;
  off.fuse_elementwise = false;
  auto a = backend->compile(step.model, on);
  auto b = backend->compile(step.model, off);
  expect_same_training(*a, *b, step, 7, 3);
}

INSTANTIATE_TEST_SUITE_P(Models, CpuFusion,
                         ::testing::Combine(::testing::Values("mlp.train.onnx", "cnn.train.onnx", "gpt.train.onnx"),
                                            ::testing::Values(DType::kFloat, DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           name = name.substr(0, name.find('.'));
                           return name + "_" + std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace amp::test
