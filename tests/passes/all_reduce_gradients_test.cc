// The all-reduce-gradients pass on the models/ training steps: where the AllReduce nodes go and
// what reads them (each gradient averaged once, in buckets of the asked size in the backward's
// order, each node right after its inputs' producers; fp16 scaled gradients averaged in fp32
// before the inf check and the unscaling; with accumulation the accumulated gradient, gated by the
// apply flag; BatchNorm statistics), the saved step through ONNX's checker, and two replicas run
// on the CPU backend in two threads (tests/support/thread_communicator.h) against one process on
// their joined batch: the same losses within 1e-5 and bit-identical state on both replicas, and
// one exchange per optimizer step with accumulation.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <random>
#include <thread>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "passes/training/training_info.h"
#include "passes/training/training_step.h"
#include "tests/support/test_support.h"
#include "tests/support/thread_communicator.h"

namespace amp {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

Model load(const std::string& name) {
  register_amp_op_schemas();
  return load_model(test::source_dir() + "/models/" + name + ".train.onnx");
}

TrainingSpec spec(DType precision, int64_t bucket_bytes = int64_t{25} << 20, int64_t accumulate = 1) {
  TrainingSpec s;
  s.loss = LossSpec{LossKind::kCrossEntropy, "logits", "labels"};
  s.optimizer.kind = OptimizerSpec::Kind::kAdamW;
  s.precision = precision;
  s.loss_scale.mode = precision == DType::kFloat16 ? LossScaleSpec::Mode::kDynamic : LossScaleSpec::Mode::kNone;
  s.accumulate = accumulate;
  s.clip_norm = 0.5f;
  s.data_parallel.enabled = true;
  s.data_parallel.bucket_bytes = bucket_bytes;
  return s;
}

std::vector<const Node*> all_reduces(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->domain() == kAmpDomain && n->op_type() == "AllReduce") out.push_back(n);
  return out;
}

// The node just before n in the graph's order.
const Node* before(const Graph& g, const Node* n) {
  const Node* prev = nullptr;
  for (const Node* m : g.nodes()) {
    if (m == n) return prev;
    prev = m;
  }
  return nullptr;
}

TEST(AllReduceGradients, EachGradientOnceInBucketsOfTheBackwardsOrderRightAfterItsProducers) {
  // 4-byte buckets: one gradient each.
  TrainingStep step = build_training_step(load("mlp"), spec(DType::kFloat, 4));
  const Graph& g = *step.model.graph;
  const auto nodes = all_reduces(g);
  ASSERT_EQ(nodes.size(), step.params.size());
  std::vector<std::string> order;
  for (const Node* n : nodes) {
    ASSERT_EQ(n->inputs().size(), 2u);
    EXPECT_EQ(n->input(0), nullptr) << "no gate without accumulation";
    const Value* grad = n->input(1);
    EXPECT_EQ(grad->dtype(), DType::kFloat);
    EXPECT_EQ(grad->uses().size(), 1u) << grad->name() << ": only the average is read";
    EXPECT_EQ(before(g, n), grad->producer()) << n->label();
    order.push_back(n->output(0)->name());
  }
  // The backward pass makes the last layer's gradients first.
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.front().rfind("fc3.", 0), 0u) << order.front();
  EXPECT_EQ(order.back().rfind("fc1.", 0), 0u) << order.back();

  // Buckets fill up to their size in that order: fc3's and fc2's gradients (650 + 8256 floats,
  // 35624 bytes) fit in 36000 bytes, fc1's bias (512 bytes) no longer, its weight alone.
  TrainingStep two = build_training_step(load("mlp"), spec(DType::kFloat, 36000));
  std::vector<size_t> sizes;
  for (const Node* n : all_reduces(*two.model.graph)) sizes.push_back(n->inputs().size() - 1);
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 1, 1}));
  // The default, 25 MiB: one bucket.
  EXPECT_EQ(all_reduces(*build_training_step(load("mlp"), spec(DType::kFloat)).model.graph).size(), 1u);
  TrainingSpec off = spec(DType::kFloat);
  off.data_parallel.enabled = false;
  EXPECT_TRUE(all_reduces(*build_training_step(load("mlp"), off).model.graph).empty());
}

TEST(AllReduceGradients, Fp16ScaledGradientsAreAveragedInFp32BeforeTheCheckAndTheUnscaling) {
  TrainingStep step = build_training_step(load("mlp"), spec(DType::kFloat16));
  const Graph& g = *step.model.graph;
  const auto nodes = all_reduces(g);
  ASSERT_EQ(nodes.size(), 1u);
  const Node* ar = nodes[0];
  std::set<const Value*> averages(ar->outputs().begin(), ar->outputs().end());
  for (size_t i = 1; i < ar->inputs().size(); ++i) {
    const Value* in = ar->input(i);
    EXPECT_EQ(in->dtype(), DType::kFloat);
    ASSERT_NE(in->producer(), nullptr);
    EXPECT_EQ(in->producer()->op_type(), "Cast") << "the fp16 gradient widened to fp32, still scaled";
  }
  const Node* check = nullptr;
  for (const Node* n : g.nodes())
    if (n->op_type() == "AllFiniteScaled") check = n;
  ASSERT_NE(check, nullptr);
  ASSERT_EQ(check->inputs().size(), averages.size() + 1);
  for (size_t i = 1; i < check->inputs().size(); ++i) EXPECT_TRUE(averages.count(check->input(i))) << i;
  for (const Value* avg : averages)
    for (const Use& u : avg->uses())
      EXPECT_TRUE(u.node == check || u.node->op_type() == "Mul") << u.node->label() << " reads " << avg->name();
}

TEST(AllReduceGradients, AccumulatedGradientsAreAveragedOnTheApplyingMicroBatch) {
  TrainingStep step = build_training_step(load("mlp"), spec(DType::kFloat16, int64_t{25} << 20, 4));
  const auto nodes = all_reduces(*step.model.graph);
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_FALSE(step.apply_update.empty());
  EXPECT_EQ(nodes[0]->input(0)->name(), step.apply_update);
  for (size_t i = 1; i < nodes[0]->inputs().size(); ++i)
    EXPECT_EQ(nodes[0]->input(i)->producer()->op_type(), "Mul") << "the accumulated sum times 1/4";
}

TEST(AllReduceGradients, BatchNormStatisticsAreAveragedAndTheSavedStepPassesTheChecker) {
  TrainingStep step = build_training_step(load("cnn"), spec(DType::kFloat16));
  const Graph& g = *step.model.graph;
  const auto nodes = all_reduces(g);
  ASSERT_EQ(nodes.size(), 2u);  // the gradients, the statistics
  int statistics = 0;
  for (const auto& [state, next] : step.updates) {
    if (state.find("running_") == std::string::npos) continue;
    ++statistics;
    const Node* made = g.value(next)->producer();
    ASSERT_NE(made, nullptr) << next;
    EXPECT_EQ(made->op_type(), "AllReduce") << state;
    EXPECT_EQ(next, state + "_next");
  }
  EXPECT_EQ(statistics, 8);
  // What each rank computed itself keeps a name that says so.
  EXPECT_NE(g.value("bn1.running_mean_this_rank"), nullptr);

  Model saved = to_training_info_model(step, {});
  const std::string path = test::temp_dir("all_reduce_saved") + "/step.onnx";
  save_model(saved, path);
  Model loaded = load_model(path);  // onnx::checker and shape inference accept it
  TrainingStep again = step_from_training_info(loaded);
  EXPECT_EQ(all_reduces(*again.model.graph).size(), 2u);
}

// A batch of n random images and labels.
Feeds batch(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  return {{"input", x}, {"labels", y}};
}

// Rows [from, from + n) of a batch.
Feeds rows(const Feeds& b, int64_t from, int64_t n) {
  Feeds out;
  for (const auto& [key, t] : b) {
    std::vector<int64_t> dims = t.dims;
    dims[0] = n;
    Tensor r(t.dtype, dims);
    const size_t row = t.nbytes() / static_cast<size_t>(t.dims[0]);
    std::memcpy(r.mutable_data(), t.data() + static_cast<size_t>(from) * row, static_cast<size_t>(n) * row);
    out.emplace_back(key, std::move(r));
  }
  return out;
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

TEST(AllReduceGradients, TwoReplicasTrainAsOneProcessOnTheirJoinedBatch) {
  constexpr int kSteps = 6, kBatch = 8;
  // One process, batches of 2 x kBatch, no AllReduce.
  TrainingSpec single_spec = spec(DType::kFloat);
  single_spec.data_parallel.enabled = false;
  TrainingStep single = build_training_step(load("mlp"), single_spec);
  auto one = make_backend("cpu")->compile(single.model, CompileOptions{single.state, single.updates, 1, 1});
  std::vector<double> one_loss;
  for (int s = 0; s < kSteps; ++s) {
    Feeds f = batch(2 * kBatch, 100 + s);
    f.emplace_back(single.lr, scalar(1e-3f));
    one_loss.push_back(one->run(f, {single.loss})[0].element(0));
  }

  // Two replicas with 4 KB buckets (several AllReduce nodes), each on half of every batch.
  TrainingStep step = build_training_step(load("mlp"), spec(DType::kFloat, 4096));
  auto ranks = test::thread_ranks(2);
  std::vector<std::unique_ptr<Executable>> exes;
  for (int r = 0; r < 2; ++r) {
    CompileOptions o{step.state, step.updates, 1, 1};
    o.communicator = ranks[static_cast<size_t>(r)];
    exes.push_back(make_backend("cpu")->compile(step.model, o));
  }
  std::vector<std::vector<double>> loss(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      for (int s = 0; s < kSteps; ++s) {
        Feeds f = rows(batch(2 * kBatch, 100 + s), r * kBatch, kBatch);
        f.emplace_back(step.lr, scalar(1e-3f));
        loss[static_cast<size_t>(r)].push_back(exes[static_cast<size_t>(r)]->run(f, {step.loss})[0].element(0));
      }
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSteps; ++s) {
    const double mean = (loss[0][static_cast<size_t>(s)] + loss[1][static_cast<size_t>(s)]) / 2;
    EXPECT_NEAR(mean, one_loss[static_cast<size_t>(s)], 1e-5 * std::abs(one_loss[static_cast<size_t>(s)])) << "step " << s;
  }
  EXPECT_EQ(ranks[0]->sums(), kSteps * static_cast<int>(all_reduces(*step.model.graph).size()));
  for (const std::string& name : exes[0]->state_names()) {
    EXPECT_TRUE(exes[0]->read_state(name).same_contents(exes[1]->read_state(name))) << name;
    const Tensor a = exes[0]->read_state(name), b = one->read_state(name);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.element(i), b.element(i), 1e-5 + 1e-4 * std::abs(b.element(i))) << name << "[" << i << "]";
  }
}

TEST(AllReduceGradients, WithAccumulationOnlyTheApplyingMicroBatchExchanges) {
  TrainingStep step = build_training_step(load("mlp"), spec(DType::kFloat16, int64_t{25} << 20, 2));
  auto ranks = test::thread_ranks(2);
  std::vector<std::unique_ptr<Executable>> exes;
  for (int r = 0; r < 2; ++r) {
    CompileOptions o{step.state, step.updates, 1, 1};
    o.communicator = ranks[static_cast<size_t>(r)];
    exes.push_back(make_backend("cpu")->compile(step.model, o));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      for (int micro = 0; micro < 6; ++micro) {
        Feeds f = batch(4, static_cast<uint32_t>(10 * micro + r));
        f.emplace_back(step.lr, scalar(1e-3f));
        f.emplace_back(step.apply_update, flag(micro % 2 == 1));
        exes[static_cast<size_t>(r)]->run(f, {step.loss});
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ranks[0]->sums(), 3);  // 3 optimizer steps, one bucket
  for (const std::string& name : exes[0]->state_names())
      EXPECT_TRUE(exes[0]->read_state(name).same_contents(exes[1]->read_state(name))) << name;
}

}  // namespace
}  // namespace amp
