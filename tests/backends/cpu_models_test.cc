// The demo models (models/*.onnx, exported from PyTorch) on the CPU backend against PyTorch's own
// outputs for the same inputs (models/*.sample.npz, written by make_inputs.py --torch-outputs),
// and the memory plan's reuse on them.
#include <gtest/gtest.h>

#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/test_support.h"

namespace amp::test {
namespace {

struct Sample {
  std::vector<std::pair<std::string, Tensor>> inputs;
  Tensor logits;
};

Sample sample(const std::string& name) {
  Sample s;
  for (auto& [key, t] : read_npz(source_dir() + "/models/" + name + ".sample.npz")) {
    if (key == "logits")
      s.logits = t;
    else
      s.inputs.emplace_back(key, t);
  }
  return s;
}

double max_relative_error(const Tensor& got, const Tensor& want) {
  double scale = 0, err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.element(i)));
  for (int64_t i = 0; i < want.numel(); ++i) err = std::max(err, std::abs(got.element(i) - want.element(i)));
  return err / scale;
}

// Max |error| over the outputs' largest magnitude: fp32 with a different summation order than
// PyTorch's (MKL-DNN / its own GEMMs) stays within a few fp32 epsilons of that scale. Measured:
// mlp 0 (bit-identical), cnn 2.2e-7, gpt 4.5e-7; the bound is 1e-5.
class DemoModel : public ::testing::TestWithParam<const char*> {};

TEST_P(DemoModel, MatchesPyTorchInFp32) {
  const std::string name = GetParam();
  const Model m = load_model(source_dir() + "/models/" + name + ".onnx");
  const Sample s = sample(name);
  auto exe = make_backend("cpu")->compile(m, {});
  const auto out = exe->run(s.inputs, {"logits"});
  ASSERT_EQ(out[0].dims, s.logits.dims);
  const double err = max_relative_error(out[0], s.logits);
  EXPECT_LT(err, 1e-5) << name;
  std::printf("%s: max |amp - torch| / max |torch| = %.2e\n", name.c_str(), err);
}

TEST_P(DemoModel, ArenaReusesBuffersAndBatchSizesReplan) {
  const std::string name = GetParam();
  const Model m = load_model(source_dir() + "/models/" + name + ".onnx");
  Sample s = sample(name);
  auto exe = make_backend("cpu")->compile(m, {});
  exe->run(s.inputs, {"logits"});
  const MemoryStats small = exe->memory();
  EXPECT_LT(small.arena_bytes, small.intermediate_bytes) << name << ": the arena must reuse buffers";
  EXPECT_GE(small.arena_bytes, small.peak_bytes);
  std::printf("%s: arena %zu bytes, sum of intermediates %zu, peak live %zu\n", name.c_str(), small.arena_bytes,
              small.intermediate_bytes, small.peak_bytes);
  // Twice the batch: a new plan with a bigger arena, and the same answers for the repeated rows.
  Tensor& x = s.inputs[0].second;
  Tensor big(x.dtype, x.dims);
  big.dims[0] *= 2;
  big = Tensor::from_bytes(x.dtype, big.dims,
                           std::string(reinterpret_cast<const char*>(x.data()), x.nbytes()) +
                               std::string(reinterpret_cast<const char*>(x.data()), x.nbytes()));
  const auto doubled = exe->run({{s.inputs[0].first, big}}, {"logits"});
  EXPECT_GT(exe->memory().arena_bytes, small.arena_bytes);
  const auto again = exe->run(s.inputs, {"logits"});
  ASSERT_EQ(doubled[0].numel(), 2 * again[0].numel());
  // Equal up to the last bits: OpenBLAS picks its sgemm kernel by the matrix sizes and the CPU, so
  // the rows of a bigger batch need not be bit-identical (gpt's are not on an AMD EPYC machine). A
  // buffer mix-up in the new plan would be off by far more.
  for (int64_t i = 0; i < again[0].numel(); ++i) {
    const float want = again[0].as<float>()[i];
    const float tol = 1e-5f * std::max(1.0f, std::fabs(want));
    EXPECT_NEAR(doubled[0].as<float>()[i], want, tol);
    EXPECT_NEAR(doubled[0].as<float>()[i + again[0].numel()], want, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DemoModel, ::testing::Values("mlp", "cnn", "gpt"));

// The training exports run too: BatchNorm in training mode with its running statistics, Dropout
// with training_mode; their logits differ from the eval ones by design, so only shapes are checked.
TEST(DemoTrainingModel, TrainExportsRunWithBatchStatistics) {
  for (const char* name : {"mlp", "cnn", "gpt"}) {
    const Model m = load_model(source_dir() + "/models/" + name + ".train.onnx");
    const Sample s = sample(name);
    const auto out = make_backend("cpu")->compile(m, {})->run(s.inputs, {"logits"});
    EXPECT_EQ(out[0].dims, s.logits.dims) << name;
  }
}

}  // namespace
}  // namespace amp::test
