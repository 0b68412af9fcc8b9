// amp-train on a transformer exported before opset 17, whose nn.LayerNorms PyTorch spells as
// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add (tests/frontends/
// amp_train_layer_norm_reference.py): the training step recognises each chain as one
// LayerNormalization, as amp-rewrite does, and differentiates it with one LayerNormalizationGrad.
// The saved step (--save-training-graph) must hold the 5 LayerNormalizations and their gradients
// and none of the chain's Pow and Sqrt (nothing else in the model has them), and the losses of 5
// steps of SGD with momentum must be torch's: within 2e-6 relative of torch's float64 run (torch's
// own fp32 run is within 2e-7 of it; amp-train's, measured, 1e-7, as it was with the chain).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/metric_losses.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string script() { return test::source_dir() + "/tests/frontends/amp_train_layer_norm_reference.py"; }

using test::metric_losses;

TEST(AmpTrainLayerNorm, DecomposedLayerNormTrainsAsOneLayerNormalizationWithTorchsLosses) {
  const std::string dir = test::temp_dir("amp_train_layer_norm");
  std::string out;
  ASSERT_EQ(test::run_python(script() + " export " + dir, &out), 0) << out;
  ASSERT_EQ(test::run_python(script() + " ops " + dir + "/model.onnx", &out), 0) << out;
  const auto exported = nlohmann::json::parse(out);
  ASSERT_EQ(exported.value("Pow", 0), 5) << "the export spells its 5 LayerNorms out: " << out;
  ASSERT_EQ(exported.value("Sqrt", 0), 5) << out;
  ASSERT_EQ(exported.value("LayerNormalization", 0), 0) << out;

  const std::string step = dir + "/step.onnx";
  const std::string cmd = test::binary_dir() + "/amp-train " + dir + "/model.onnx --data " + dir +
                          "/data.npz --loss cross_entropy --no-shuffle --batch-size 4 --steps 5 --lr 0.01 "
                          "--momentum 0.9 --threads 1 --metrics " + dir + "/metrics.jsonl --save-training-graph " + step +
                          " 2>&1";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;

  ASSERT_EQ(test::run_python(script() + " ops " + step, &out), 0) << out;
  const auto ops = nlohmann::json::parse(out);
  EXPECT_EQ(ops.value("LayerNormalization", 0), 5) << out;
  EXPECT_EQ(ops.value("LayerNormalizationGrad", 0), 5) << out;
  EXPECT_EQ(ops.value("Pow", 0), 0) << out;
  EXPECT_EQ(ops.value("Sqrt", 0), 0) << out;

  const auto losses = nlohmann::json::parse(test::read_file(dir + "/losses.json"));
  const auto fp64 = losses["fp64"].get<std::vector<double>>();
  const auto torch32 = losses["fp32"].get<std::vector<double>>();
  const auto ours = metric_losses(dir + "/metrics.jsonl");
  ASSERT_EQ(ours.size(), fp64.size());
  for (size_t s = 0; s < fp64.size(); ++s) {
    ASSERT_NEAR(torch32[s], fp64[s], 2e-6 * fp64[s]) << "torch fp32 itself, step " << s + 1;
    EXPECT_NEAR(ours[s], fp64[s], 2e-6 * fp64[s]) << "step " << s + 1;
  }
}

}  // namespace
}  // namespace amp
