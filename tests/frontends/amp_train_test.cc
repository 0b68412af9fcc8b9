// amp-train end to end: resume (N steps + resume + N steps is 2N steps bit for bit, dropout
// included), same seed same result, the metrics records, the errors a user can cause (a graph
// input missing from the data, labels of the wrong type or shape, a loss that stays non-finite with
// the scale at its minimum — the last good checkpoint kept), --save run by ONNX Runtime against
// PyTorch's eval-mode model with the saved weights, --save-training-graph read by amp-inspect and
// trained on again, IDX and CSV data, one epoch when no length is given, and --compare-fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "frontends/lib/npz.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string tool(const std::string& name) { return test::binary_dir() + "/" + name; }
std::string model(const std::string& name) { return test::source_dir() + "/models/" + name + ".train.onnx"; }

// n random images (float32 [n,1,28,28] in [0,1)) and labels (int64 [n]).
void write_data(const std::string& path, int64_t n, uint32_t seed, float poison = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = poison != 0 ? poison : u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  write_npz(path, {{"input", x}, {"labels", y}});
}

int train(const std::string& args, std::string* out) {
  return test::run_command(tool("amp-train") + " " + args, out);
}

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) r.push_back(nlohmann::json::parse(line));
  return r;
}

std::vector<std::pair<std::string, Tensor>> state_of(const std::string& checkpoint_dir) {
  auto arrays = read_npz(checkpoint_dir + "/checkpoint.npz");
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& a : arrays)
    if (a.first != "__position__") state.push_back(std::move(a));
  return state;
}

void expect_same_state(const std::string& a, const std::string& b) {
  auto x = state_of(a), y = state_of(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].first, y[i].first);
    EXPECT_TRUE(x[i].second.same_contents(y[i].second)) << x[i].first;
  }
}

class AmpTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_data(dir_ + "/train.npz", 128, 1);
    write_data(dir_ + "/val.npz", 40, 2);
  }
  std::string common(const std::string& m, int steps) {
    return model(m) + " --data " + dir_ + "/train.npz --val " + dir_ + "/val.npz --loss cross_entropy --batch-size 16 --steps " +
           std::to_string(steps) + " --seed 5 --optimizer adamw --lr 0.001";
  }
  std::string dir_;
};

TEST_F(AmpTrain, ResumeContinuesBitForBit) {
  // The CNN has Dropout(0.1): the random stream must continue across the resume as well. The
  // validation passes (eval-mode BatchNorm in fp16) run in between.
  std::string out;
  ASSERT_EQ(train(common("cnn", 12) + " --dtype fp16 --checkpoint " + dir_ + "/whole --metrics " + dir_ + "/whole.jsonl", &out), 0) << out;
  ASSERT_EQ(train(common("cnn", 5) + " --dtype fp16 --checkpoint " + dir_ + "/parts --metrics " + dir_ + "/parts.jsonl", &out), 0) << out;
  ASSERT_EQ(train(common("cnn", 12) + " --dtype fp16 --resume " + dir_ + "/parts --checkpoint " + dir_ + "/parts --metrics " +
                      dir_ + "/parts.jsonl",
                  &out),
            0)
      << out;
  expect_same_state(dir_ + "/whole", dir_ + "/parts");
  auto steps_of = [](const std::vector<nlohmann::json>& all) {
    std::vector<nlohmann::json> steps;
    for (const auto& j : all)
      if (j.contains("loss")) steps.push_back(j);
    return steps;
  };
  auto a = steps_of(records(dir_ + "/whole.jsonl")), b = steps_of(records(dir_ + "/parts.jsonl"));
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "step " << i + 1;
}

TEST_F(AmpTrain, SameSeedSameResult) {
  std::string out;
  for (const char* run : {"a", "b"})
    ASSERT_EQ(train(common("cnn", 4) + " --checkpoint " + dir_ + "/" + run, &out), 0) << out;
  expect_same_state(dir_ + "/a", dir_ + "/b");
}

TEST_F(AmpTrain, MetricsHaveAStepRecordPerStepAndAValidationRecordPerEpoch) {
  std::string out;
  // 128 samples / batch 16 = 8 micro-batches per epoch; 2 epochs.
  ASSERT_EQ(train(model("mlp") + " --data " + dir_ + "/train.npz --val " + dir_ + "/val.npz --loss cross_entropy " +
                      "--batch-size 16 --epochs 2 --dtype fp16 --metrics " + dir_ + "/m.jsonl",
                  &out),
            0)
      << out;
  auto r = records(dir_ + "/m.jsonl");
  int steps = 0, validations = 0;
  for (const auto& j : r) {
    if (j.contains("val_loss")) {
      ++validations;
      EXPECT_TRUE(j.contains("epoch") && j.contains("val_accuracy")) << j.dump();
      EXPECT_GE(j["val_accuracy"].get<double>(), 0.0);
    } else {
      ++steps;
      for (const char* k : {"step", "loss", "loss_scale", "skipped", "lr", "samples_per_second"})
        EXPECT_TRUE(j.contains(k)) << k << " missing in " << j.dump();
      EXPECT_EQ(j["step"].get<int>(), steps);
      EXPECT_EQ(j["loss_scale"].get<double>(), 65536.0);
    }
  }
  EXPECT_EQ(steps, 16);
  EXPECT_EQ(validations, 2);
  EXPECT_NE(out.find("ms/step"), std::string::npos) << out;
  EXPECT_NE(out.find("ms/step (the first "), std::string::npos) << "the first step's planning time is shown\n" << out;
  EXPECT_NE(out.find("peak memory"), std::string::npos) << out;
}

TEST_F(AmpTrain, DataErrorsNameTheArrayAndExitWith2) {
  Tensor x(DType::kFloat, {32, 1, 28, 28});
  Tensor fractional(DType::kFloat, {32});
  for (int64_t i = 0; i < 32; ++i) fractional.mutable_as<float>()[i] = 0.5f;
  Tensor wide(DType::kInt64, {32, 2});
  write_npz(dir_ + "/no_input.npz", {{"images", x}, {"labels", Tensor(DType::kInt64, {32})}});
  write_npz(dir_ + "/float_labels.npz", {{"input", x}, {"labels", fractional}});
  write_npz(dir_ + "/wide_labels.npz", {{"input", x}, {"labels", wide}});
  const std::string base = model("mlp") + " --loss cross_entropy --steps 1 --batch-size 8 --data " + dir_;
  std::string out;
  EXPECT_EQ(train(base + "/no_input.npz", &out), 2);
  EXPECT_NE(out.find("no array 'input' for graph input input"), std::string::npos) << out;
  EXPECT_EQ(train(base + "/float_labels.npz", &out), 2);
  EXPECT_NE(out.find("array 'labels'"), std::string::npos) << out;
  EXPECT_NE(out.find("class indices"), std::string::npos) << out;
  EXPECT_EQ(train(base + "/wide_labels.npz", &out), 2);
  EXPECT_NE(out.find("array 'labels' has samples of shape [2]"), std::string::npos) << out;
}

TEST_F(AmpTrain, LossStuckNonFiniteAtTheMinimumScaleStopsAndKeepsTheLastCheckpoint) {
  std::string out;
  const std::string ckpt = dir_ + "/ckpt";
  ASSERT_EQ(train(common("mlp", 2) + " --dtype fp16 --loss-scale 1 --checkpoint " + ckpt, &out), 0) << out;
  const std::string good = test::read_file(ckpt + "/checkpoint.npz");
  write_data(dir_ + "/nan.npz", 128, 1, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(train(model("mlp") + " --data " + dir_ + "/nan.npz --loss cross_entropy --batch-size 16 --steps 10 --seed 5 "
                      "--optimizer adamw --lr 0.001 --dtype fp16 --loss-scale 1 --resume " + ckpt + " --checkpoint " + ckpt,
                  &out),
            2);
  EXPECT_NE(out.find("the loss stays non-finite"), std::string::npos) << out;
  EXPECT_NE(out.find("last good checkpoint"), std::string::npos) << out;
  EXPECT_EQ(test::read_file(ckpt + "/checkpoint.npz"), good);
}

TEST_F(AmpTrain, SavedModelRunsInOnnxRuntimeAsPyTorchsEvalModel) {
  std::string out;
  ASSERT_EQ(train(common("cnn", 3) + " --save " + dir_ + "/trained.onnx", &out), 0) << out;
  // The saved weights are the trained ones (not the file's), and ONNX Runtime computes what
  // PyTorch's eval-mode CNN computes with them.
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/saved_model_reference.py " + dir_ + "/trained.onnx " +
                                 model("cnn") + " " + dir_,
                             &out),
            0)
      << out;
  ASSERT_EQ(test::run_command("node " + test::source_dir() + "/tests/ort/run_model.js " + dir_ + "/trained.onnx " + dir_ +
                                  "/in " + dir_ + "/ort",
                              &out),
            0)
      << out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/saved_model_reference.py --compare " + dir_, &out), 0)
      << out;
}

TEST_F(AmpTrain, SavedTrainingGraphIsInspectedAndTrainedAgain) {
  std::string out;
  const std::string step = dir_ + "/step.onnx";
  ASSERT_EQ(train(common("cnn", 2) + " --dtype fp16 --save-training-graph " + step, &out), 0) << out;
  ASSERT_EQ(test::run_command(tool("amp-inspect") + " " + step, &out), 0) << out;
#if AMP_HAVE_CUDA
  // The cuda backend plans the saved step whole (its values keep their types through the save):
  // the inf/NaN check and the optimizer's multi-tensor update are in it.
  ASSERT_EQ(test::run_command(tool("amp-inspect") + " --cuda-plan --dim N=16 " + step + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("cuda plan of the training step"), std::string::npos) << out;
  EXPECT_NE(out.find("AllFiniteScaled"), std::string::npos) << out;
  EXPECT_NE(out.find("multi-tensor"), std::string::npos) << out;
#endif
  ASSERT_EQ(train(step + " --data " + dir_ + "/train.npz --batch-size 16 --steps 2 --seed 5 --optimizer adamw --lr 0.001 "
                      "--dtype fp16 --metrics " + dir_ + "/again.jsonl",
                  &out),
            0)
      << out;
  auto r = records(dir_ + "/again.jsonl");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(std::isfinite(r[1]["loss"].get<double>()));
}

TEST_F(AmpTrain, ReadsIdxAndCsv) {
  std::string out;
  ASSERT_EQ(train(model("mlp") + " --data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --loss cross_entropy "
                      "--batch-size 64 --steps 3",
                  &out),
            0)
      << out;
  std::ofstream csv(dir_ + "/data.csv");
  csv << "labels";
  for (int i = 0; i < 784; ++i) csv << ",p" << i;
  csv << "\n";
  for (int r = 0; r < 16; ++r) {
    csv << r % 10;
    for (int i = 0; i < 784; ++i) csv << "," << ((r * 31 + i * 7) % 100) / 100.0;
    csv << "\n";
  }
  csv.close();
  ASSERT_EQ(train(model("mlp") + " --data " + dir_ + "/data.csv --loss cross_entropy --batch-size 8 --steps 2", &out), 0) << out;
}

TEST_F(AmpTrain, WithoutEpochsOrStepsTrainsOneEpochAndSaysSo) {
  // As people type it first: 128 samples in batches of 32 (the default) make 4 steps.
  std::string out;
  ASSERT_EQ(test::run_command("cd " + dir_ + " && " + tool("amp-train") + " " + model("mlp") +
                                  " --data train.npz --loss cross_entropy --metrics m.jsonl",
                              &out),
            0)
      << out;
  EXPECT_EQ(out.rfind("info: training 4 steps of 32 samples: 1 epoch of 128 samples (neither --epochs nor --steps given)", 0),
            0u)
      << out;
  EXPECT_NE(out.find("train: 4 steps (0 skipped)"), std::string::npos) << out;
  EXPECT_EQ(records(dir_ + "/m.jsonl").size(), 4u);
  EXPECT_EQ(train(model("mlp") + " --data " + dir_ + "/train.npz --loss cross_entropy --epochs 0", &out), 2);
  EXPECT_NE(out.find("--epochs"), std::string::npos) << out;
}

TEST_F(AmpTrain, CompareFp32PrintsBothRuns) {
  std::string out;
  ASSERT_EQ(train(common("mlp", 3) + " --dtype bf16 --compare-fp32", &out), 0) << out;
  for (const char* k : {"fp32", "bf16", "ms/step", "first step s", "peak memory", "final loss"})
    EXPECT_NE(out.find(k), std::string::npos) << k << "\n" << out;
}

// Issue 13: data with one NaN pixel (sample 37 of 128) is reported once at load, naming the file,
// the array and the sample; in fp32, fp16 and bf16 the one step whose batch holds it is skipped
// (its logged loss NaN, JSON null) and nothing non-finite reaches a weight (nor the CNN's BatchNorm
// running statistics): the checkpoint holds finite values only, resumes, and the saved model gives
// finite outputs. --strict-data refuses it.
TEST_F(AmpTrain, NaNInTheDataIsReportedAndNeverReachesAWeight) {
  Tensor x = read_npz(dir_ + "/train.npz")[0].second;
  const Tensor labels = read_npz(dir_ + "/train.npz")[1].second;
  x.mutable_as<float>()[37 * 784 + 300] = std::numeric_limits<float>::quiet_NaN();
  const std::string data = dir_ + "/nan.npz";
  write_npz(data, {{"input", x}, {"labels", labels}});
  std::string out;
  for (const char* net : {"mlp", "cnn"})
  for (const char* dtype : {"fp32", "fp16", "bf16"}) {
    SCOPED_TRACE(std::string(net) + " " + dtype);
    const std::string ckpt = dir_ + "/ckpt_" + net + dtype, metrics = dir_ + "/" + net + dtype + ".jsonl";
    const std::string args = model(net) + " --data " + data + " --val " + dir_ + "/val.npz --loss cross_entropy " +
                             "--batch-size 16 --seed 5 --optimizer adamw --lr 0.001 --dtype " + dtype;
    ASSERT_EQ(train(args + " --steps 8 --checkpoint " + ckpt + " --metrics " + metrics + " --save " + dir_ + "/saved.onnx", &out),
              0)
        << out;
    EXPECT_NE(out.find(data + ": array 'input' has 1 NaN and 0 inf in 1 of 128 samples, the first sample 37"),
              std::string::npos)
        << out;
    // One epoch: the batch with sample 37, once; its loss NaN, which JSON writes as null. (fp16's
    // dynamic loss scale may skip steps of its own while it finds its level: finite losses.)
    int nan_steps = 0, skipped = 0;
    for (const auto& r : records(metrics)) {
      if (!r.contains("loss")) continue;
      skipped += r["skipped"].get<bool>();
      if (r["loss"].is_null()) {
        ++nan_steps;
        EXPECT_TRUE(r["skipped"].get<bool>()) << r.dump();
      }
    }
    EXPECT_EQ(nan_steps, 1) << out;
    if (std::string(dtype) != "fp16") {
      EXPECT_EQ(skipped, 1) << out;
    }
    EXPECT_NE(out.find("skipped: non-finite loss (loss nan); nothing was applied"), std::string::npos) << out;
    if (std::string(dtype) != "fp16") {  // no loss scale to show: the progress line counts the skipped step only
      EXPECT_EQ(out.find(" scale "), std::string::npos) << out;
      EXPECT_NE(out.find("samples/s skipped 1 ETA"), std::string::npos) << out;
    }
    for (const auto& [name, t] : state_of(ckpt)) {
      if (!is_floating(t.dtype)) continue;
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(t.element(i))) << name << "[" << i << "]";
    }
    ASSERT_EQ(train(args + " --steps 10 --resume " + ckpt + " --checkpoint " + ckpt, &out), 0) << out;
    ASSERT_EQ(test::run_command(tool("amp-run") + " " + dir_ + "/saved.onnx --inputs " + dir_ + "/val.npz --outputs " +
                                    dir_ + "/saved_out.npz",
                                &out),
              0)
        << out;
    EXPECT_EQ(out.find("NaN and"), std::string::npos) << out;
  }
  EXPECT_EQ(train(model("mlp") + " --data " + data + " --loss cross_entropy --batch-size 16 --steps 2 --strict-data", &out), 2);
  EXPECT_NE(out.find("array 'input' has 1 NaN and 0 inf in 1 of 128 samples, the first sample 37 (--strict-data)"),
            std::string::npos)
      << out;
}

// Validation counts the samples whose outputs hold NaN or inf beside a loss that is NaN.
TEST_F(AmpTrain, ValidationCountsSamplesWithNonFiniteOutputs) {
  auto arrays = read_npz(dir_ + "/val.npz");
  arrays[0].second.mutable_as<float>()[11 * 784 + 5] = std::numeric_limits<float>::infinity();
  write_npz(dir_ + "/val_inf.npz", arrays);
  std::string out;
  ASSERT_EQ(train(model("mlp") + " --data " + dir_ + "/train.npz --val " + dir_ + "/val_inf.npz --loss cross_entropy " +
                      "--batch-size 16 --steps 8 --metrics " + dir_ + "/m.jsonl",
                  &out),
            0)
      << out;
  EXPECT_NE(out.find("val_inf.npz: array 'input' has 0 NaN and 1 inf in 1 of 40 samples, the first sample 11"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("val_loss nan val_accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("(1 of 40 samples with NaN or inf outputs)"), std::string::npos) << out;
  int validations = 0;
  for (const auto& r : records(dir_ + "/m.jsonl")) {
    if (!r.contains("val_loss")) continue;
    ++validations;
    EXPECT_TRUE(r["val_loss"].is_null()) << r.dump();
    EXPECT_EQ(r["val_non_finite"], 1) << r.dump();
  }
  EXPECT_EQ(validations, 1);
}

// Without a loss scale to lower (fp32, bf16), steps skipped in a row stop the run at
// --max-skipped-steps, with the last good checkpoint kept.
TEST_F(AmpTrain, TooManySkippedStepsInARowStopTheRun) {
  std::string out;
  write_data(dir_ + "/nan.npz", 128, 1, std::numeric_limits<float>::quiet_NaN());
  for (const char* dtype : {"fp32", "bf16"}) {
    EXPECT_EQ(train(model("mlp") + " --data " + dir_ + "/nan.npz --loss cross_entropy --batch-size 16 --steps 8 --dtype " +
                        dtype + " --max-skipped-steps 3",
                    &out),
              2);
    EXPECT_NE(out.find("3 steps in a row skipped for non-finite gradients (--max-skipped-steps 3), the last at step 3"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("step 1 skipped: non-finite loss (loss nan)"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace amp
