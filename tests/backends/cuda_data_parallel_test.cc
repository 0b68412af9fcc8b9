// Data-parallel training steps on the cuda backend (passes/training/all_reduce_gradients.h,
// backends/cuda/collective_ops.cc). Without a device: the plan of an MLP step with several gradient
// buckets issues each AllReduce right after the products that make its gradients and joins it only
// at the first reader of the averages, with backward launches in between, and the device layout
// keeps what a collective reads and writes in buffers no unit in between writes. On a device (a
// GPU, or test_cuda_backend_emulated's stand-ins of cudart and NCCL): the step over NCCL at world
// size 1 tracks the CPU backend and replays as a captured CUDA Graph whose NCCL stream is forked and
// joined inside the capture, and computes bit for bit what the step without AllReduce computes;
// with accumulation, the micro-batches without and with the collective are two captured plans. On
// a machine with two GPUs: two ranks (threads, one GPU each) on half a batch each track the CPU on
// the whole batch, their state bit for bit the same (the stand-ins cannot run two ranks: the
// kernel emulator runs one thread's launches at a time).
#include <gtest/gtest.h>

#if !AMP_HAVE_CUDA
TEST(CudaDataParallel, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA (nvcc not found)"; }
#else

#include <cstring>
#include <set>
#include <thread>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/device_layout.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/cuda/schedule.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "passes/training/training_step.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/parity.h"
#include "tests/support/thread_communicator.h"

namespace amp {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

std::string device_missing() {
  std::string why;
  return cuda::CudaBackend().available(&why) ? "" : why;
}

#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    const std::string why = device_missing();                           \
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why; \
  } while (0)

// models/mlp in fp16 with AdamW and dynamic loss scaling, gradients averaged in 4 KB buckets (4:
// fc3's and one of fc2's, fc2's weight, fc1's bias, fc1's weight).
TrainingStep data_parallel_mlp(int64_t accumulate = 1, bool data_parallel = true) {
  register_amp_op_schemas();
  TrainingSpec spec;
  spec.optimizer.kind = OptimizerSpec::Kind::kAdamW;
  spec.optimizer.weight_decay = 0.01f;
  spec.precision = DType::kFloat16;
  spec.loss_scale.mode = LossScaleSpec::Mode::kDynamic;
  spec.loss.kind = LossKind::kCrossEntropy;
  spec.accumulate = accumulate;
  spec.data_parallel.enabled = data_parallel;
  spec.data_parallel.bucket_bytes = 4096;
  return build_training_step(test::shipped_model("mlp.train.onnx"), spec);
}

Tensor scalar(float v) {
  Tensor t(DType::kFloat, {});
  *t.mutable_as<float>() = v;
  return t;
}

Tensor flag(bool v) {
  Tensor t(DType::kBool, {});
  *t.mutable_as<bool>() = v;
  return t;
}

// Rows [from, from + n) of a batch of 8 random images and labels drawn from `seed`.
Feeds batch(uint32_t seed, int64_t from = 0, int64_t n = 8) {
  const Tensor x = test::random_tensor(DType::kFloat, {8, 1, 28, 28}, seed, 0, 1);
  const Tensor y = test::random_tensor(DType::kInt64, {8}, seed + 1, 0, 10);
  Feeds out;
  for (const auto& [key, t] : Feeds{{"input", x}, {"labels", y}}) {
    std::vector<int64_t> dims = t.dims;
    dims[0] = n;
    Tensor r(t.dtype, dims);
    const size_t row = t.nbytes() / 8;
    std::memcpy(r.mutable_data(), t.data() + static_cast<size_t>(from) * row, static_cast<size_t>(n) * row);
    out.emplace_back(key, std::move(r));
  }
  return out;
}

TEST(CudaDataParallel, CollectivesRunBesideTheBackwardAndKeepTheirBuffersUntilJoined) {
  const TrainingStep step = data_parallel_mlp();
  const cuda::Schedule s(step.model, test::step_options(step));
  std::vector<Tensor> feeds = test::zero_feeds(s);
  const cuda::ShapePlan p = test::plan_with(s, feeds);
  std::vector<bool> beside;
  std::vector<size_t> collectives;
  for (size_t pos = 0; pos < p.order.size(); ++pos) {
    beside.push_back(p.order[pos]->kind.rfind("AllReduce", 0) == 0);
    if (beside.back()) collectives.push_back(pos);
  }
  ASSERT_GE(collectives.size(), 3u);
  const std::vector<int64_t> join = cuda::join_positions(p, beside);
  // The first bucket (fc3's weight) is issued while fc2's and fc1's gradient products are still
  // to come, and the step's stream waits for it only where the averages are read.
  std::set<std::string> in_between;
  for (int64_t pos = static_cast<int64_t>(collectives[0]) + 1; pos < join[collectives[0]]; ++pos)
    in_between.insert(p.order[static_cast<size_t>(pos)]->kind);
  std::string kinds;
  for (const std::string& k : in_between) kinds += k + "; ";
  EXPECT_TRUE(kinds.find("MatMul") != std::string::npos || kinds.find("Gemm") != std::string::npos) << kinds;
  std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
  for (const Tensor& t : feeds) fed[s.program.find(t.name)] = &t;
  std::vector<int> fetches = s.program.outputs;
  const cuda::DeviceLayout l = cuda::layout_device_memory(s, p, fed, fetches, 256, beside);
  for (size_t pos : collectives) {
    const cuda::Unit& u = *p.order[pos];
    // Read until the join: no unit before it may be given their bytes.
    for (int v : u.in)
      if (v >= 0 && l.offset[p.root(v)] >= 0) {
        EXPECT_GE(l.last_read[p.root(v)], join[pos]) << s.program.values[v].name;
      }
    for (int v : u.out) EXPECT_GE(l.last_read[v], join[pos]) << s.program.values[v].name;
    // Nothing written between issue and join overlaps them.
    for (int64_t at = static_cast<int64_t>(pos) + 1; at < join[pos]; ++at)
      for (int w : p.order[static_cast<size_t>(at)]->out) {
        if (w < 0 || l.offset[w] < 0) continue;
        for (int v : u.in) {
          if (v < 0 || l.offset[p.root(v)] < 0) continue;
          const int64_t a = l.offset[w], b = l.offset[p.root(v)];
          const bool overlap = a < b + static_cast<int64_t>(p.desc[p.root(v)].nbytes()) && b < a + static_cast<int64_t>(p.desc[w].nbytes());
          EXPECT_FALSE(overlap) << s.program.values[w].name << " overwrites " << s.program.values[v].name;
        }
      }
  }
}

// At world size 1 the average is the gradient itself: the step over NCCL computes, bit for bit,
// what the same step without AllReduce computes on the device (the widening is exact), and its
// losses track the CPU's.
TEST(CudaDataParallel, EachProcessTakesItsLocalRanksGpu) {
  EXPECT_EQ(cuda::device_for_local_rank(0, 2, 2), 0);
  EXPECT_EQ(cuda::device_for_local_rank(1, 2, 8), 1);
  EXPECT_EQ(cuda::device_for_local_rank(1, 2, 1), 0);  // the launcher gave each process its own GPU
  EXPECT_THROW(cuda::device_for_local_rank(2, 4, 2), InputError);
}

TEST(CudaDataParallelGpu, OneRankOverNcclComputesWhatTheStepWithoutItComputes) {
  REQUIRE_GPU();
  const TrainingStep step = data_parallel_mlp(), plain_step = data_parallel_mlp(1, false);
  CompileOptions options = test::step_options(step);
  options.communicator = test::thread_ranks(1)[0];
  auto gpu = make_backend("cuda")->compile(step.model, options);
  auto plain = make_backend("cuda")->compile(plain_step.model, test::step_options(plain_step));
  auto cpu = make_backend("cpu")->compile(step.model, test::step_options(step));  // no communicator: AllReduce passes on
  for (int s = 0; s < 5; ++s) {  // past the capture
    Feeds f = batch(10 + static_cast<uint32_t>(s));
    f.emplace_back(step.lr, scalar(1e-3f));
    const Tensor lg = gpu->run(f, {step.loss})[0];
    EXPECT_TRUE(lg.same_contents(plain->run(f, {plain_step.loss})[0])) << "loss at step " << s;
    test::expect_close(lg, cpu->run(f, {step.loss})[0], "loss at step " + std::to_string(s), 10.0);
  }
  EXPECT_GE(dynamic_cast<cuda::CudaExecutable&>(*gpu).graph_replays(), 2u);
  for (const std::string& name : plain->state_names())
    EXPECT_TRUE(gpu->read_state(name).same_contents(plain->read_state(name))) << name;
}

TEST(CudaDataParallelGpu, AccumulationCapturesMicroBatchesWithAndWithoutTheCollective) {
  REQUIRE_GPU();
  const TrainingStep step = data_parallel_mlp(2), plain_step = data_parallel_mlp(2, false);
  CompileOptions options = test::step_options(step);
  options.communicator = test::thread_ranks(1)[0];
  auto gpu = make_backend("cuda")->compile(step.model, options);
  auto plain = make_backend("cuda")->compile(plain_step.model, test::step_options(plain_step));
  for (int micro = 0; micro < 10; ++micro) {  // each of the two plans past its capture
    Feeds f = batch(20 + static_cast<uint32_t>(micro));
    f.emplace_back(step.lr, scalar(1e-3f));
    f.emplace_back(step.apply_update, flag(micro % 2 == 1));
    EXPECT_TRUE(gpu->run(f, {step.loss})[0].same_contents(plain->run(f, {plain_step.loss})[0])) << "loss " << micro;
    if (micro >= 6) {
      EXPECT_GE(dynamic_cast<cuda::CudaExecutable&>(*gpu).graph_replays(), 1u) << micro;
    }
  }
  for (const std::string& name : plain->state_names())
    EXPECT_TRUE(gpu->read_state(name).same_contents(plain->read_state(name))) << name;
}

TEST(CudaDataParallelGpu, TwoRanksOnHalfTheBatchTrackOneCpuProcessOnAllOfIt) {
  REQUIRE_GPU();
  int devices = 0;
  cudaGetDeviceCount(&devices);
  if (devices < 2) GTEST_SKIP() << "two ranks need two GPUs; this machine has " << devices;
  const TrainingStep step = data_parallel_mlp();
  auto cpu = make_backend("cpu")->compile(step.model, test::step_options(step));
  auto ranks = test::thread_ranks(2);
  std::vector<std::unique_ptr<Executable>> gpus(2);
  std::vector<std::vector<Tensor>> losses(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        CompileOptions o = test::step_options(step);
        o.communicator = ranks[static_cast<size_t>(r)];
        gpus[static_cast<size_t>(r)] = make_backend("cuda")->compile(step.model, o);
        for (int s = 0; s < 5; ++s) {
          Feeds f = batch(30 + static_cast<uint32_t>(s), 4 * r, 4);
          f.emplace_back(step.lr, scalar(1e-3f));
          losses[static_cast<size_t>(r)].push_back(gpus[static_cast<size_t>(r)]->run(f, {step.loss})[0]);
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (int s = 0; s < 5; ++s) {
    Feeds f = batch(30 + static_cast<uint32_t>(s));
    f.emplace_back(step.lr, scalar(1e-3f));
    const Tensor whole = cpu->run(f, {step.loss})[0];
    Tensor mean(DType::kFloat, {});
    *mean.mutable_as<float>() = static_cast<float>((losses[0][static_cast<size_t>(s)].element(0) +
                                                    losses[1][static_cast<size_t>(s)].element(0)) / 2);
    test::expect_close(mean, whole, "mean loss at step " + std::to_string(s), 10.0);
  }
  for (const std::string& name : gpus[0]->state_names())
    EXPECT_TRUE(gpus[0]->read_state(name).same_contents(gpus[1]->read_state(name))) << name;
  for (const std::string& name : step.params) test::expect_close(gpus[0]->read_state(name), cpu->read_state(name), name, 10.0);
}

}  // namespace
}  // namespace amp

#endif
