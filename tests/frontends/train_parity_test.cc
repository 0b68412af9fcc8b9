// amp-train against PyTorch: the models/ MLP and CNN (.train.onnx), from the weights in their
// ONNX files, on the same Fashion-MNIST batches, with SGD + momentum + weight decay and with
// AdamW. tests/frontends/train_reference.py trains models/torch_models.py's classes with those
// weights and dumps the loss of every step; amp-train's --metrics must give the same losses:
// within 1e-4 relative in fp32 for all 100 steps.
//
// The CNN's learning rates are small on purpose: with BatchNorm over batches of 32 and ReLU /
// MaxPool switching, its trajectory is chaotic at larger ones — PyTorch against itself (1 thread
// against 2, which only reorders fp32 sums) drifts past 1e-4 by step ~20 at SGD lr 0.05 and by
// step ~40 at lr 0.01, so no implementation can match it to 1e-4 there. At SGD lr 0.001 and AdamW
// lr 2e-4 PyTorch reproduces itself to 2.4e-5 and amp-train matches it to 3.5e-5 (measured).
//
// With --dtype bf16 against PyTorch's CPU bf16 autocast the first steps agree to ~1e-5, then bf16
// rounding differences grow (measured: 1.5% worst for the MLP, 0.1% for the CNN), so the test
// asks the losses to track: within 5% relative at every step and 2% on the mean of the last 20.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/metric_losses.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

struct Parity {
  std::string model, optimizer, dtype;
  double lr, momentum, weight_decay;
};

void PrintTo(const Parity& p, std::ostream* os) { *os << p.model << "_" << p.optimizer << "_" << p.dtype; }

using test::metric_losses;

class TrainParity : public ::testing::TestWithParam<Parity> {};

TEST_P(TrainParity, LossOfEveryStepMatchesPyTorch) {
  const Parity& p = GetParam();
  const std::string dir = test::temp_dir("train_parity_" + p.model + "_" + p.optimizer + "_" + p.dtype);
  const int steps = 100, batch = 32;
  const std::string numbers = " --lr " + std::to_string(p.lr) + " --momentum " + std::to_string(p.momentum) +
                              " --weight-decay " + std::to_string(p.weight_decay);
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/train_reference.py " + p.model + " " + dir +
                                 " --optimizer " + p.optimizer + " --steps " + std::to_string(steps) + " --batch " +
                                 std::to_string(batch) + " --dtype " + p.dtype + numbers,
                             &out),
            0)
      << out;
  const std::string cmd = test::binary_dir() + "/amp-train " + dir + "/model.onnx --data " + dir +
                          "/data.npz --loss cross_entropy --no-shuffle --steps " + std::to_string(steps) +
                          " --batch-size " + std::to_string(batch) + " --optimizer " + p.optimizer +
                          numbers + " --dtype " + p.dtype +
                          " --metrics " + dir + "/metrics.jsonl";
  ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;

  const auto ours = metric_losses(dir + "/metrics.jsonl");
  const auto theirs = nlohmann::json::parse(test::read_file(dir + "/losses.json")).get<std::vector<double>>();
  ASSERT_EQ(ours.size(), static_cast<size_t>(steps));
  ASSERT_EQ(theirs.size(), static_cast<size_t>(steps));
  if (p.dtype == "fp32") {
    for (int s = 0; s < steps; ++s)
      EXPECT_NEAR(ours[s], theirs[s], 1e-4 * std::fabs(theirs[s])) << "step " << s + 1;
  } else {
    double tail_ours = 0, tail_theirs = 0;
    for (int s = 0; s < steps; ++s) {
      EXPECT_NEAR(ours[s], theirs[s], 0.05 * std::fabs(theirs[s])) << "step " << s + 1;
      if (s >= steps - 20) {
        tail_ours += ours[s];
        tail_theirs += theirs[s];
      }
    }
    EXPECT_NEAR(tail_ours, tail_theirs, 0.02 * tail_theirs);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainParity,
                         ::testing::Values(Parity{"mlp", "sgd", "fp32", 0.05, 0.9, 1e-4},
                                           Parity{"mlp", "adamw", "fp32", 1e-3, 0, 0.01},
                                           Parity{"cnn", "sgd", "fp32", 1e-3, 0.9, 1e-4},
                                           Parity{"cnn", "adamw", "fp32", 2e-4, 0, 0.01},
                                           Parity{"mlp", "adamw", "bf16", 1e-3, 0, 0.01},
                                           Parity{"cnn", "sgd", "bf16", 1e-3, 0.9, 1e-4}),
                         [](const ::testing::TestParamInfo<Parity>& i) {
                           return i.param.model + "_" + i.param.optimizer + "_" + i.param.dtype;
                         });

}  // namespace
}  // namespace amp
