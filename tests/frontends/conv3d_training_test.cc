// amp-train on a 3-D Conv + ConvTranspose3d model (tests/frontends/conv3d_training_reference.py):
// the gradients of both run on the CPU (ConvGrad's 3-D path is oneDNN's), and the losses of 3 SGD
// steps are torch's — fp32 within 2e-6 relative of torch's float64 run, fp16 and bf16 within what
// their rounding allows (2e-3 and 1e-2; measured 3e-5 and 2e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/metric_losses.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using test::metric_losses;

TEST(Conv3dTraining, ConvAndConvTransposeIn3DTrainWithTorchsLosses) {
  const std::string dir = test::temp_dir("conv3d_training");
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/conv3d_training_reference.py " + dir, &out), 0)
      << out;
  const auto torch_losses = nlohmann::json::parse(test::read_file(dir + "/losses.json"));
  const auto fp64 = torch_losses["fp64"].get<std::vector<double>>();
  for (const auto& [dtype, tolerance] : {std::pair<std::string, double>{"fp32", 2e-6}, {"fp16", 2e-3}, {"bf16", 1e-2}}) {
    const std::string metrics = dir + "/" + dtype + ".jsonl";
    const std::string cmd = test::binary_dir() + "/amp-train " + dir + "/model.onnx --data " + dir +
                            "/data.npz --loss cross_entropy --no-shuffle --batch-size 8 --steps 3 --lr 0.1 --threads 2 "
                            "--dtype " + dtype + " --metrics " + metrics + " 2>&1";
    ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;
    const std::vector<double> ours = metric_losses(metrics);
    ASSERT_EQ(ours.size(), fp64.size()) << out;
    for (size_t i = 0; i < ours.size(); ++i)
      EXPECT_LE(std::fabs(ours[i] - fp64[i]), tolerance * std::fabs(fp64[i]))
          << dtype << " step " << i + 1 << ": " << ours[i] << " against torch float64's " << fp64[i];
  }
}

}  // namespace
}  // namespace amp
