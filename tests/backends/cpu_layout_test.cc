// Convolution weights kept in oneDNN's blocked layout from step to step
// (CompileOptions::native_weight_layouts, View::layout) change no result: the models/ CNN's
// training step (AdamW, BatchNorm, residual blocks, 16 and 32 channels) in fp32, fp16 and bf16,
// run with blocked weights and with every tensor dense from the same state and feeds, gives the
// same losses and the same state, bit for bit, after several steps. The blocked layout is taken
// (its weights, gradients' optimizer moments), read_state returns dense tensors, and write_state
// takes them.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/executable.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/parity.h"

namespace amp::test {
namespace {

class CpuLayouts : public ::testing::TestWithParam<DType> {};

TEST_P(CpuLayouts, TrainingStepsGiveTheSameBitsWithBlockedAndDenseWeights) {
  const TrainingStep step = mixed_precision_step("cnn.train.onnx", GetParam());
  auto backend = make_backend("cpu");
  CompileOptions on = step_options(step), off = step_options(step);
  on.threads = off.threads = 2;
  off.native_weight_layouts = false;
  auto a = backend->compile(step.model, on);
  auto b = backend->compile(step.model, off);
  expect_same_training(*a, *b, step, 11, 3);

  // The blocked layout was taken: the 16- and 32-channel convolutions' weights and the AdamW
  // moments that follow them; the dense run keeps none. In bf16 on CPUs with AMX (Sapphire
  // Rapids) oneDNN 2.6's forward, backward-data and backward-weights primitives each ask for
  // another blocking of the same weights (measured: 16o2i inner blocks after O,h,w,i; 16o16i2o;
  // 16i16o2i; the first names no oneDNN format tag), so no one layout serves them and every weight
  // stays dense: there the bf16 case checks the same bits only.
  const auto* blocked = dynamic_cast<const cpu::CpuExecutable*>(a.get());
  const auto* dense = dynamic_cast<const cpu::CpuExecutable*>(b.get());
  ASSERT_TRUE(blocked && dense);
  const std::vector<std::string> names = blocked->blocked_state();
  EXPECT_TRUE(dense->blocked_state().empty());
  const int amx_bits = static_cast<int>(dnnl::cpu_isa::avx512_core_amx);
  const bool amx = (static_cast<int>(dnnl::get_effective_cpu_isa()) & amx_bits) == amx_bits;
  if (GetParam() == DType::kBFloat16 && amx && names.empty()) return;
  EXPECT_GE(names.size(), 4u);
  for (const std::string& name : names) {
    const Tensor t = a->read_state(name);
    EXPECT_EQ(t.dims.size(), 4u) << name << " is not a convolution's weight-shaped state";
  }

  // write_state takes a dense tensor into blocked state: the next step matches the dense run's
  // given the same new weights, and read_state returns what was written.
  ASSERT_FALSE(names.empty());
  Tensor w = a->read_state(names.front());
  std::mt19937 gen(5);
  for (int64_t i = 0; i < w.numel(); ++i)
    if (w.dtype == DType::kFloat) w.mutable_as<float>()[i] = std::uniform_real_distribution<float>(-0.5f, 0.5f)(gen);
  a->write_state(names.front(), w);
  b->write_state(names.front(), w);
  EXPECT_TRUE(same_bits(a->read_state(names.front()), w));
  expect_same_training(*a, *b, step, 21, 1);
}

INSTANTIATE_TEST_SUITE_P(Cnn, CpuLayouts, ::testing::Values(DType::kFloat, DType::kFloat16, DType::kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace amp::test
