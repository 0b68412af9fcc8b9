// amp-train under mpirun (2 processes, 1 thread each) against single-process training:
//  - the MLP on the same global batch (DistributedSampler's shards, shuffled): losses, accuracy and
//    validation within 1e-5 relative, with clipping and with --accumulate; both ranks' whole state
//    bit for bit the same;
//  - the CNN, whose BatchNorm normalises each rank's own batch (as PyTorch DDP without
//    SyncBatchNorm), against one process accumulating the ranks' two batches as its micro-batches:
//    every loss, weight and Adam moment bit for bit (dropout set to 0: masks are per-process draws);
//  - fp16 with dynamic loss scaling and a sample that overflows fp16 in rank 1's shard only (the
//    shards trained alone show it: rank 1's skips that step, rank 0's does not): both ranks skip it
//    and halve the scale, the history equals one process on the global batch;
//  - a checkpoint written by 2 processes resumed by 2 continues bit for bit (CNN, fp16, dropout);
//    resumed by 1 inside an epoch, refused; at an epoch's end, continued with the next epoch;
//  - failures: a rank killed with SIGKILL ends the job non-zero within 60 s with mpirun's line
//    naming the rank and the signal; a stopped rank ends it after the collective timeout with the
//    waiting rank's line; an error on one rank ends the job with one line naming the rank; ranks
//    started with different options or models are refused at start with one line; a step saved
//    by one process is refused under mpirun; a torchrun launch is refused.
// Rank 1's view comes from AMP_TRAIN_RANK_DIR (frontends/lib/data_parallel.h).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "frontends/lib/npz.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string tool(const std::string& name) { return test::binary_dir() + "/" + name; }
std::string model(const std::string& name) { return test::source_dir() + "/models/" + name + ".train.onnx"; }
const std::string kMpirun = "mpirun --allow-run-as-root --oversubscribe ";

using Arrays = std::vector<std::pair<std::string, Tensor>>;

// n random images (float32 [n,1,28,28] in [0,1)) and labels (int64 [n]).
Arrays random_data(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  return {{"input", x}, {"labels", y}};
}

// The given samples of every array, in that order.
Arrays rows_of(const Arrays& data, const std::vector<int64_t>& rows) {
  Arrays out;
  for (const auto& [key, t] : data) {
    std::vector<int64_t> dims = t.dims;
    dims[0] = static_cast<int64_t>(rows.size());
    Tensor r(t.dtype, dims);
    const size_t row = t.nbytes() / static_cast<size_t>(t.dims[0]);
    for (size_t i = 0; i < rows.size(); ++i)
      std::memcpy(r.mutable_data() + i * row, t.data() + static_cast<size_t>(rows[i]) * row, row);
    out.emplace_back(key, std::move(r));
  }
  return out;
}

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!nlohmann::json::parse(line).contains("val_loss")) r.push_back(nlohmann::json::parse(line));
  return r;
}

std::vector<nlohmann::json> validations(const std::string& path) {
  std::vector<nlohmann::json> r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (nlohmann::json::parse(line).contains("val_loss")) r.push_back(nlohmann::json::parse(line));
  return r;
}

std::map<std::string, Tensor> arrays_of(const std::string& npz) {
  std::map<std::string, Tensor> m;
  for (auto& [key, t] : read_npz(npz))
    if (key != "__position__") m.emplace(key, std::move(t));
  return m;
}

// Every array of `b` is in `a` with the same bytes (names listed in `except` excepted).
void expect_same_bits(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                      const std::string& except = "") {
  ASSERT_FALSE(b.empty());
  for (const auto& [name, t] : b) {
    if (!except.empty() && name.find(except) != std::string::npos) continue;
    auto it = a.find(name);
    ASSERT_NE(it, a.end()) << name;
    EXPECT_TRUE(it->second.same_contents(t)) << name;
  }
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef AMP_HAVE_MPI
    GTEST_SKIP() << "this build has no MPI (AMP_ENABLE_MPI off or OpenMPI not installed)";
#endif
    if (test::run_command("command -v mpirun", nullptr) != 0) GTEST_SKIP() << "mpirun is not installed";
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  // Runs a shell command; its output goes to the test log when it fails.
  int run(const std::string& cmd, std::string* out = nullptr) {
    std::string text;
    const int rc = test::run_command(cmd, &text);
    if (out) *out = text;
    return rc;
  }
  std::string ranks(int n, const std::string& args) {
    return "AMP_TRAIN_RANK_DIR=" + dir_ + "/ranks " + kMpirun + "-np " + std::to_string(n) + " " + tool("amp-train") +
           " " + args;
  }
  std::string dir_;
};

TEST_F(DataParallel, MlpTwoProcessesTrainAsOneOnTheGlobalBatch) {
  write_npz(dir_ + "/train.npz", random_data(256, 1));
  write_npz(dir_ + "/val.npz", random_data(50, 2));
  const std::string base = model("mlp") + " --data " + dir_ + "/train.npz --val " + dir_ +
                           "/val.npz --loss cross_entropy --steps 20 --seed 3 --clip-norm 0.5 --threads 1";
  const std::string common = base + " --optimizer adamw --lr 0.001";
  std::string out;
  ASSERT_EQ(run(tool("amp-train") + " " + common + " --batch-size 32 --metrics " + dir_ + "/one.jsonl", &out), 0) << out;
  ASSERT_EQ(run(ranks(2, common + " --batch-size 16 --metrics " + dir_ + "/two.jsonl --save " + dir_ + "/two.onnx"), &out), 0)
      << out;
  const auto one = records(dir_ + "/one.jsonl"), two = records(dir_ + "/two.jsonl");
  ASSERT_EQ(one.size(), 20u);
  ASSERT_EQ(two.size(), 20u);  // rank 0 alone writes
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_LT(relative(two[i]["loss"], one[i]["loss"]), 1e-5) << "step " << i + 1;
    EXPECT_EQ(two[i]["accuracy"], one[i]["accuracy"]) << "step " << i + 1;
  }
  const auto val_one = validations(dir_ + "/one.jsonl"), val_two = validations(dir_ + "/two.jsonl");
  ASSERT_EQ(val_one.size(), 3u);  // after epochs 1 and 2, and at the end
  ASSERT_EQ(val_two.size(), val_one.size());
  for (size_t i = 0; i < val_one.size(); ++i) {
    EXPECT_LT(relative(val_two[i]["val_loss"], val_one[i]["val_loss"]), 1e-5);
    EXPECT_EQ(val_two[i]["val_accuracy"], val_one[i]["val_accuracy"]);
  }
  expect_same_bits(arrays_of(dir_ + "/ranks/rank0.state.npz"), arrays_of(dir_ + "/ranks/rank1.state.npz"));
  EXPECT_TRUE(std::ifstream(dir_ + "/two.onnx").good());

  // --accumulate 2: the gradients of a step's two micro-batches are averaged once, over both ranks.
  // SGD, whose update scales with the gradient (Adam's hardly does): clipping the norm of each
  // rank's own gradient instead of the average's would show.
  const std::string sgd = base + " --optimizer sgd --momentum 0.9 --lr 0.05";
  ASSERT_EQ(run(tool("amp-train") + " " + sgd + " --batch-size 64 --metrics " + dir_ + "/one_acc.jsonl", &out), 0) << out;
  ASSERT_EQ(run(ranks(2, sgd + " --batch-size 16 --accumulate 2 --metrics " + dir_ + "/two_acc.jsonl"), &out), 0) << out;
  const auto one_acc = records(dir_ + "/one_acc.jsonl"), two_acc = records(dir_ + "/two_acc.jsonl");
  ASSERT_EQ(one_acc.size(), 20u);
  ASSERT_EQ(two_acc.size(), 20u);
  for (size_t i = 0; i < one_acc.size(); ++i)
    EXPECT_LT(relative(two_acc[i]["loss"], one_acc[i]["loss"]), 1e-5) << "step " << i + 1;
  expect_same_bits(arrays_of(dir_ + "/ranks/rank0.state.npz"), arrays_of(dir_ + "/ranks/rank1.state.npz"));
}

TEST_F(DataParallel, CnnTwoProcessesTrainAsOneAccumulatingTheirBatches) {
  // Rank r reads samples 2k + r (no shuffling); one process reads, per step, rank 0's batch then
  // rank 1's as its two micro-batches, each normalised by its own BatchNorm statistics.
  const std::string cnn = dir_ + "/cnn.onnx";
  std::string out;
  ASSERT_EQ(test::run_python(test::source_dir() + "/tests/frontends/without_dropout.py " + model("cnn") + " " + cnn, &out), 0)
      << out;
  const Arrays data = random_data(128, 4);
  write_npz(dir_ + "/train.npz", data);
  const int64_t batch = 16;
  std::vector<int64_t> interleaved;
  for (int64_t step = 0; step < 128 / (2 * batch); ++step)
    for (int64_t rank = 0; rank < 2; ++rank)
      for (int64_t j = 0; j < batch; ++j) interleaved.push_back(2 * (step * batch + j) + rank);
  write_npz(dir_ + "/micro.npz", rows_of(data, interleaved));
  const std::string common = cnn + " --loss cross_entropy --steps 20 --seed 3 --optimizer adamw --lr 0.003 --clip-norm 1 "
                                   "--threads 1 --no-shuffle --batch-size 16";
  ASSERT_EQ(run(tool("amp-train") + " " + common + " --data " + dir_ + "/micro.npz --accumulate 2 --metrics " + dir_ +
                    "/one.jsonl --checkpoint " + dir_ + "/one",
                &out),
            0)
      << out;
  ASSERT_EQ(run(ranks(2, common + " --data " + dir_ + "/train.npz --metrics " + dir_ + "/two.jsonl --checkpoint " + dir_ +
                             "/two"),
                &out),
            0)
      << out;
  const auto one = records(dir_ + "/one.jsonl"), two = records(dir_ + "/two.jsonl");
  ASSERT_EQ(one.size(), 20u);
  ASSERT_EQ(two.size(), 20u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(two[i]["loss"], one[i]["loss"]) << "step " << i + 1;
    EXPECT_EQ(two[i]["accuracy"], one[i]["accuracy"]) << "step " << i + 1;
  }
  // Weights and Adam moments bit for bit; the running statistics differ by design: the one process
  // moves them twice per step (once per micro-batch), the ranks once, to their average.
  expect_same_bits(arrays_of(dir_ + "/one/checkpoint.npz"), arrays_of(dir_ + "/two/checkpoint.npz"), "running_");
  expect_same_bits(arrays_of(dir_ + "/ranks/rank0.state.npz"), arrays_of(dir_ + "/ranks/rank1.state.npz"));
}

TEST_F(DataParallel, Fp16OverflowOnOneRankSkipsTheStepOnEveryRank) {
  // Sample 167 is rank 1's 84th (2k + 1, k = 83): its batch 5 of 16, step 6. 1e5 overflows fp16.
  Arrays data = random_data(256, 1);
  float* x = data[0].second.mutable_as<float>();
  for (int64_t i = 0; i < 28 * 28; ++i) x[167 * 28 * 28 + i] = 1e5f;
  write_npz(dir_ + "/train.npz", data);
  std::vector<int64_t> shard0, shard1;
  for (int64_t k = 0; k < 128; ++k) {
    shard0.push_back(2 * k);
    shard1.push_back(2 * k + 1);
  }
  write_npz(dir_ + "/shard0.npz", rows_of(data, shard0));
  write_npz(dir_ + "/shard1.npz", rows_of(data, shard1));
  const std::string common = model("mlp") + " --loss cross_entropy --steps 12 --seed 3 --optimizer adamw --lr 0.001 "
                                            "--threads 1 --dtype fp16 --no-shuffle";
  std::string out;
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(run(tool("amp-train") + " " + common + " --batch-size 16 --data " + dir_ + "/shard" + std::to_string(r) +
                      ".npz --metrics " + dir_ + "/alone" + std::to_string(r) + ".jsonl",
                  &out),
              0)
        << out;
  ASSERT_EQ(run(tool("amp-train") + " " + common + " --batch-size 32 --data " + dir_ + "/train.npz --metrics " + dir_ +
                    "/one.jsonl",
                &out),
            0)
      << out;
  ASSERT_EQ(run(ranks(2, common + " --batch-size 16 --data " + dir_ + "/train.npz"), &out), 0) << out;

  const auto alone0 = records(dir_ + "/alone0.jsonl"), alone1 = records(dir_ + "/alone1.jsonl");
  const auto one = records(dir_ + "/one.jsonl");
  const auto rank0 = records(dir_ + "/ranks/rank0.jsonl"), rank1 = records(dir_ + "/ranks/rank1.jsonl");
  ASSERT_EQ(alone0.size(), 12u);
  ASSERT_EQ(alone1.size(), 12u);
  ASSERT_EQ(one.size(), 12u);
  ASSERT_EQ(rank0.size(), 12u);
  ASSERT_EQ(rank1.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    const bool injected = i == 5;
    EXPECT_FALSE(alone0[i]["skipped"].get<bool>()) << "step " << i + 1;  // rank 0's data never overflows
    EXPECT_EQ(alone1[i]["skipped"].get<bool>(), injected) << "step " << i + 1;
    EXPECT_EQ(rank0[i]["skipped"].get<bool>(), injected) << "step " << i + 1;
    EXPECT_EQ(rank1[i]["skipped"].get<bool>(), injected) << "step " << i + 1;
    EXPECT_EQ(rank0[i]["loss_scale"], rank1[i]["loss_scale"]) << "step " << i + 1;
    EXPECT_EQ(rank0[i]["loss_scale"], one[i]["loss_scale"]) << "step " << i + 1;
    EXPECT_EQ(one[i]["skipped"], rank0[i]["skipped"]) << "step " << i + 1;
    EXPECT_EQ(rank0[i]["global_loss"], rank1[i]["global_loss"]) << "step " << i + 1;
    if (injected) {  // the overflowing sample's loss is not finite: logged as null, never averaged away
      EXPECT_TRUE(rank0[i]["global_loss"].is_null()) << rank0[i];
      EXPECT_TRUE(one[i]["loss"].is_null()) << one[i];
      continue;
    }
    // fp16 logits and gradients of batches of 16 and of 32 round differently: within 2 ulps of fp16.
    EXPECT_LT(relative(rank0[i]["global_loss"], one[i]["loss"]), 2e-3) << "step " << i + 1;
  }
  // The scale is halved after the skipped step, on both ranks.
  EXPECT_EQ(rank0[6]["loss_scale"].get<double>(), rank0[5]["loss_scale"].get<double>() / 2);
  expect_same_bits(arrays_of(dir_ + "/ranks/rank0.state.npz"), arrays_of(dir_ + "/ranks/rank1.state.npz"));
}

TEST_F(DataParallel, CheckpointOfTwoProcessesResumedByTwoContinuesBitForBit) {
  write_npz(dir_ + "/train.npz", random_data(128, 5));
  write_npz(dir_ + "/val.npz", random_data(30, 6));
  // Dropout, BatchNorm statistics, fp16 loss scaling: everything the resume must carry.
  const std::string common = model("cnn") + " --data " + dir_ + "/train.npz --val " + dir_ +
                             "/val.npz --loss cross_entropy --seed 7 --optimizer adamw --lr 0.002 --dtype fp16 "
                             "--threads 1 --batch-size 16";
  std::string out;
  ASSERT_EQ(run(ranks(2, common + " --steps 12 --checkpoint " + dir_ + "/straight"), &out), 0) << out;
  // 4 steps per epoch (64 samples per rank): step 6 is inside the second epoch.
  ASSERT_EQ(run(ranks(2, common + " --steps 6 --checkpoint " + dir_ + "/halves"), &out), 0) << out;
  ASSERT_EQ(run(tool("amp-train") + " " + common + " --steps 12 --resume " + dir_ + "/halves", &out), 2) << out;
  EXPECT_NE(out.find("written by 2 processes inside an epoch"), std::string::npos) << out;
  ASSERT_EQ(run(ranks(2, common + " --steps 12 --resume " + dir_ + "/halves --checkpoint " + dir_ + "/halves"), &out), 0)
      << out;
  const auto straight = arrays_of(dir_ + "/straight/checkpoint.npz"), halves = arrays_of(dir_ + "/halves/checkpoint.npz");
  EXPECT_EQ(straight.size(), halves.size());
  expect_same_bits(straight, halves);
  expect_same_bits(arrays_of(dir_ + "/ranks/rank0.state.npz"), arrays_of(dir_ + "/ranks/rank1.state.npz"));

  // Step 12 ends the third epoch: one process takes over there, its 4th epoch 8 steps of 16.
  ASSERT_EQ(run(tool("amp-train") + " " + common + " --epochs 4 --resume " + dir_ + "/straight --metrics " + dir_ +
                    "/alone.jsonl",
                &out),
            0)
      << out;
  const auto alone = records(dir_ + "/alone.jsonl");
  ASSERT_EQ(alone.size(), 8u);
  EXPECT_EQ(alone.front()["step"], 13);
  EXPECT_EQ(alone.front()["epoch"], 3);
  EXPECT_EQ(alone.back()["epoch"], 4);
}

// Starts a long 2-process run, waits for rank 1's first step, sends rank 1 (found among mpirun's
// children, under timeout's, by its rank) `signal`, and times how long the job takes to end.
struct Ending {
  int rc = -1;
  long ms = -1;
  std::string log;
};

Ending signal_rank_one(const std::string& dir, const std::string& signal, const std::string& env) {
  const std::string script = dir + "/signal.sh";
  test::write_file(script,
                   "set -u\n" + env + " AMP_TRAIN_RANK_DIR=" + dir + "/ranks timeout 300 " + kMpirun + "-np 2 " +
                       tool("amp-train") + " " + model("mlp") + " --data " + dir +
                       "/train.npz --loss cross_entropy --batch-size 8 --steps 100000000 --threads 1 > " + dir +
                       "/job.log 2>&1 &\n"
                       "job=$!\n"
                       "for i in $(seq 1200); do [ -s " + dir + "/ranks/rank1.jsonl ] && break; sleep 0.05; done\n"
                       "victim=\n"
                       "for m in $(ps -o pid= --ppid $job); do for c in $(ps -o pid= --ppid $m); do\n"
                       "  tr '\\0' '\\n' < /proc/$c/environ | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$c\n"
                       "done; done\n"
                       "[ -n \"$victim\" ] || { echo 'no rank 1 found'; kill $job; exit 9; }\n"
                       "start=$(date +%s%N)\n"
                       "kill -" + signal + " $victim\n"
                       "wait $job; rc=$?\n"
                       "echo \"rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))\"\n"
                       "cat " + dir + "/job.log\n");
  Ending e;
  EXPECT_EQ(test::run_command("bash " + script, &e.log), 0) << e.log;
  const size_t at = e.log.find("rc=");
  EXPECT_NE(at, std::string::npos) << e.log;
  if (at != std::string::npos) {
    EXPECT_EQ(std::sscanf(e.log.c_str() + at, "rc=%d ms=%ld", &e.rc, &e.ms), 2) << e.log;
  }
  return e;
}

TEST_F(DataParallel, KilledRankEndsTheJobWithinAMinute) {
  write_npz(dir_ + "/train.npz", random_data(64, 1));
  const Ending e = signal_rank_one(dir_, "KILL", "");
  EXPECT_NE(e.rc, 0) << e.log;
  EXPECT_NE(e.rc, 124) << e.log;  // not ended by the timeout guard
  EXPECT_LT(e.ms, 60000) << e.log;
  EXPECT_NE(e.log.find("rank 1"), std::string::npos) << e.log;
  EXPECT_NE(e.log.find("signal 9"), std::string::npos) << e.log;
}

TEST_F(DataParallel, StuckRankEndsTheJobAfterTheCollectiveTimeout) {
  // Rank 1 stopped (SIGSTOP) is alive to mpirun: rank 0's watchdog ends it after 5 s in its
  // next all-reduce, and mpirun the rest.
  write_npz(dir_ + "/train.npz", random_data(64, 1));
  const Ending e = signal_rank_one(dir_, "STOP", "AMP_COLLECTIVE_TIMEOUT=5");
  EXPECT_NE(e.rc, 0) << e.log;
  EXPECT_NE(e.rc, 124) << e.log;
  EXPECT_LT(e.ms, 60000) << e.log;
  EXPECT_NE(e.log.find("error: rank 0 of 2 on "), std::string::npos) << e.log;
  EXPECT_NE(e.log.find("waited 5 s in MPI_Allreduce"), std::string::npos) << e.log;
}

TEST_F(DataParallel, ErrorOnOneRankEndsTheJobWithOneLineNamingIt) {
  write_npz(dir_ + "/train.npz", random_data(64, 1));
  const std::string good = tool("amp-train") + " " + model("mlp") + " --data " + dir_ + "/train.npz --loss cross_entropy --steps 4 --threads 1";
  const std::string bad = tool("amp-train") + " " + model("mlp") + " --data " + dir_ + "/missing.npz --loss cross_entropy --steps 4 --threads 1";
  std::string out;
  EXPECT_EQ(run("timeout 120 " + kMpirun + "-np 1 " + good + " : -np 1 " + bad, &out), 2) << out;
  EXPECT_NE(out.find("amp-train: error: rank 1 of 2 on "), std::string::npos) << out;
  EXPECT_NE(out.find("missing.npz"), std::string::npos) << out;
}

TEST_F(DataParallel, RanksStartedDifferentlyAreRefused) {
  write_npz(dir_ + "/train.npz", random_data(64, 1));
  const std::string common = " --data " + dir_ + "/train.npz --loss cross_entropy --steps 4 --threads 1";
  std::string out;
  EXPECT_EQ(run("timeout 120 " + kMpirun + "-np 1 " + tool("amp-train") + " " + model("mlp") + common + " --lr 0.01 : -np 1 " +
                    tool("amp-train") + " " + model("mlp") + common + " --lr 0.02",
                &out),
            2)
      << out;
  EXPECT_NE(out.find("amp-train: error: the processes were started differently: --lr is 0.02 on rank 1 but 0.01 on rank 0"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("amp-train: error:"), out.rfind("amp-train: error:")) << "one line:\n" << out;

  // A different model file: the CNN takes the same input and labels.
  EXPECT_EQ(run("timeout 120 " + kMpirun + "-np 1 " + tool("amp-train") + " " + model("mlp") + common + " : -np 1 " +
                    tool("amp-train") + " " + model("cnn") + common,
                &out),
            2)
      << out;
  EXPECT_NE(out.find("model (digest of the file) is"), std::string::npos) << out;
}

TEST_F(DataParallel, StepSavedByOneProcessIsRefusedUnderMpirun) {
  write_npz(dir_ + "/train.npz", random_data(64, 1));
  const std::string common = " --data " + dir_ + "/train.npz --loss cross_entropy --steps 2 --threads 1";
  std::string out;
  ASSERT_EQ(run(tool("amp-train") + " " + model("mlp") + common + " --save-training-graph " + dir_ + "/step.onnx", &out), 0)
      << out;
  EXPECT_EQ(run("timeout 120 " + kMpirun + "-np 2 " + tool("amp-train") + " " + dir_ + "/step.onnx" + common, &out), 2) << out;
  EXPECT_NE(out.find("this training step was saved by a single process"), std::string::npos) << out;
}

TEST(DataParallelLaunch, TorchrunIsRefused) {
  std::string out;
  EXPECT_EQ(test::run_command("WORLD_SIZE=2 RANK=1 " + tool("amp-train") + " " + model("mlp") +
                                  " --data nothing.npz --loss cross_entropy --steps 1",
                              &out),
            2);
  EXPECT_NE(out.find("started as rank 1 of 2 by torchrun, which this program does not join"), std::string::npos) << out;
}

}  // namespace
}  // namespace amp
