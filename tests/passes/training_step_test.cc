// The training step's graph-level machinery run on the CPU backend: fault injection (a gradient
// forced to inf at step k skips exactly that step — weights, moments and Adam's step count
// bit-identical, the loss scale halved — and training goes on), GradScaler's growth and bounds,
// bf16's check without scaling, gradient accumulation against one large batch, global-norm
// clipping against its definition, and the training_info round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/onnx_io.h"
#include "passes/graph_builder.h"
#include "passes/training/training_info.h"
#include "passes/training/training_step.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

Model mlp() {
  register_amp_op_schemas();
  return load_model(test::source_dir() + "/models/mlp.train.onnx");
}

TrainingSpec spec(DType precision, LossScaleSpec::Mode scale, OptimizerSpec::Kind opt = OptimizerSpec::Kind::kAdamW) {
  TrainingSpec s;
  s.loss = LossSpec{LossKind::kCrossEntropy, "logits", "labels"};
  s.optimizer.kind = opt;
  s.optimizer.weight_decay = 0.01f;
  s.precision = precision;
  s.loss_scale.mode = scale;
  return s;
}

Tensor scalar(float v) {
  Tensor t(DType::kFloat, {});
  *t.mutable_as<float>() = v;
  return t;
}

// A batch of `n` random images and labels, different for each `seed`.
Feeds batch(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  return {{"input", x}, {"labels", y}};
}

// Multiplies a gradient by a new scalar input "fault" (1 normally, inf or NaN to inject) where the
// backward pass computes it: for a master weight, the fp16/bf16 value the widening Cast to fp32
// reads (overflow happens there, in the low-precision backward), else the gradient `name` itself.
// Returns the fault input's type.
DType add_fault_input(TrainingStep& step, const std::string& grad_name) {
  Graph& g = *step.model.graph;
  Value* grad = g.value(grad_name);
  EXPECT_NE(grad, nullptr) << grad_name;
  if (!grad) return DType::kFloat;
  if (const Node* c = grad->producer(); c && c->op_type() == "Cast") grad = c->input(0);
  Value* fault = g.add_input("fault", ValueType::tensor(grad->dtype(), Shape::of({})));
  Node* mul = g.add_node("Mul", {grad, fault}, {grad->name() + "_faulty"}, "", grad->producer());
  g.move_before(mul, nullptr);
  mul->output(0)->set_type(grad->type());
  std::vector<Use> uses = grad->uses();
  for (const Use& u : uses)
    if (u.node != mul) u.node->set_input(u.index, mul->output(0));
  g.topological_sort();
  return grad->dtype();
}

std::unique_ptr<Executable> compile(const TrainingStep& step) {
  return make_backend("cpu")->compile(step.model, CompileOptions{step.state, step.updates, 7, 0});
}

std::map<std::string, Tensor> snapshot(const Executable& exe) {
  std::map<std::string, Tensor> s;
  for (const std::string& name : exe.state_names()) s[name] = exe.read_state(name);
  return s;
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  return a.dims == b.dims && a.dtype == b.dtype && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

struct StepRun {
  double loss;
  bool finite;
};

StepRun run_step(Executable& exe, const TrainingStep& step, uint32_t seed, float fault, DType fault_type = DType::kFloat) {
  Feeds feeds = batch(8, seed);
  feeds.emplace_back(step.lr, scalar(1e-3f));
  Tensor f(fault_type, {});
  if (fault_type == DType::kFloat16) *f.mutable_as<uint16_t>() = fp32_to_fp16(fault);
  else if (fault_type == DType::kBFloat16) *f.mutable_as<uint16_t>() = fp32_to_bf16(fault);
  else *f.mutable_as<float>() = fault;
  feeds.emplace_back("fault", f);
  auto out = exe.run(feeds, {step.loss, step.all_finite});
  return {out[0].element(0), out[1].element(0) != 0};
}

// The classification step counts its correct predictions itself (add_correct_count: ArgMax of the
// scores, Equal to the labels, summed), so amp-train fetches one number a step and not the scores
// (GPT-2's at 16 x 1024 tokens: 1.6 GB a step, then an argmax on the host: 14.8 s of a 15 s step
// on an H100). The count must be what an argmax of the same run's scores gives, ties to the
// first class: the MLP's [N, 10] scores in fp32 and bf16 (where the scores tie far more often),
// and the transformer's [N, T, vocabulary] ones, whose labels are [N, T].
int64_t host_correct(const Tensor& scores, const Tensor& labels) {
  const int64_t rows = labels.numel(), classes = scores.numel() / rows;
  int64_t correct = 0;
  std::vector<double> row(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) row[static_cast<size_t>(c)] = scores.element(r * classes + c);
    const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();  // the first of equals
    correct += best == static_cast<int64_t>(labels.element(r));
  }
  return correct;
}

TEST(Accuracy, TheStepCountsItsCorrectPredictionsAsAnArgmaxOfItsScores) {
  for (DType precision : {DType::kFloat, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    const TrainingStep step = build_training_step(mlp(), spec(precision, LossScaleSpec::Mode::kNone));
    ASSERT_FALSE(step.correct.empty());
    auto exe = compile(step);
    int64_t total = 0;
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      Feeds feeds = batch(64, seed);
      // A third of the labels set to the model's current prediction, so the count is not ~10%.
      if (seed > 1) {
        Feeds probe = feeds;
        probe.emplace_back(step.lr, scalar(0.0f));
        const Tensor scores = exe->run(probe, {step.target})[0];
        for (int64_t r = 0; r < 64; r += 3) {
          int64_t best = 0;
          for (int64_t c = 1; c < 10; ++c)
            if (scores.element(r * 10 + c) > scores.element(r * 10 + best)) best = c;
          feeds[1].second.mutable_as<int64_t>()[r] = best;
        }
      }
      feeds.emplace_back(step.lr, scalar(1e-3f));
      const auto out = exe->run(feeds, {step.correct, step.target});
      EXPECT_EQ(out[0].dtype, DType::kFloat);
      EXPECT_EQ(out[0].element(0), static_cast<double>(host_correct(out[1], feeds[1].second))) << "seed " << seed;
      total += static_cast<int64_t>(out[0].element(0));
    }
    EXPECT_GT(total, 40) << "the planted labels are counted";
  }
  // A language model: scores [N, T, vocabulary], labels [N, T].
  TrainingSpec lm = spec(DType::kBFloat16, LossScaleSpec::Mode::kNone);
  lm.loss.target = "";
  const TrainingStep step = build_training_step(load_model(test::source_dir() + "/models/gpt.train.onnx"), lm);
  ASSERT_FALSE(step.correct.empty());
  auto exe = compile(step);
  std::mt19937 rng(5);
  Tensor tokens(DType::kInt64, {4, 16}), labels(DType::kInt64, {4, 16});
  for (int64_t i = 0; i < tokens.numel(); ++i) tokens.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 64);
  for (int64_t i = 0; i < labels.numel(); ++i) labels.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 64);
  const std::string tokens_name = step.data_inputs[0];
  const auto out = exe->run({{tokens_name, tokens}, {step.labels, labels}, {step.lr, scalar(1e-3f)}}, {step.correct, step.target});
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{4, 16, 64}));
  EXPECT_EQ(out[0].element(0), static_cast<double>(host_correct(out[1], labels)));
}

TEST(FaultInjection, InfGradientSkipsTheStepLeavesStateAndHalvesTheScale) {
  TrainingStep step = build_training_step(mlp(), spec(DType::kFloat16, LossScaleSpec::Mode::kDynamic));
  ASSERT_FALSE(step.all_finite.empty());
  ASSERT_EQ(step.loss_scale, StepNames::kLossScale);
  const DType ft = add_fault_input(step, "fc2.weight_grad");
  EXPECT_EQ(ft, DType::kFloat16) << "the fault goes where the fp16 backward computes the gradient";
  auto exe = compile(step);
  const float inf = std::numeric_limits<float>::infinity();
  const int k = 3;
  for (int s = 1; s < k; ++s) EXPECT_TRUE(run_step(*exe, step, s, 1, ft).finite);
  const auto before = snapshot(*exe);
  EXPECT_EQ(before.at(StepNames::kGoodSteps).element(0), k - 1);

  const StepRun faulty = run_step(*exe, step, k, inf, ft);
  EXPECT_FALSE(faulty.finite);
  EXPECT_TRUE(std::isfinite(faulty.loss));  // the forward was fine; only the update is skipped
  const auto after = snapshot(*exe);
  for (const auto& [name, t] : before) {
    if (name == StepNames::kLossScale) {
      EXPECT_EQ(after.at(name).element(0), t.element(0) / 2) << "the scale backs off by half";
    } else if (name == StepNames::kGoodSteps) {
      EXPECT_EQ(after.at(name).element(0), 0) << "the good-step count restarts";
    } else {
      EXPECT_TRUE(bits_equal(after.at(name), t)) << name << " changed on a skipped step";
    }
  }
  // Training goes on: the next step is finite and updates weights, moments and Adam's count.
  EXPECT_TRUE(run_step(*exe, step, k + 1, 1, ft).finite);
  const auto next = snapshot(*exe);
  EXPECT_FALSE(bits_equal(next.at("fc2.weight"), after.at("fc2.weight")));
  EXPECT_FALSE(bits_equal(next.at("fc2.weight.exp_avg"), after.at("fc2.weight.exp_avg")));
  EXPECT_EQ(next.at(StepNames::kOptimizerStep).element(0), after.at(StepNames::kOptimizerStep).element(0) + 1);
  EXPECT_EQ(next.at(StepNames::kLossScale).element(0), after.at(StepNames::kLossScale).element(0));
}

TEST(FaultInjection, Bf16ChecksWithoutScaling) {
  TrainingStep step = build_training_step(mlp(), spec(DType::kBFloat16, LossScaleSpec::Mode::kNone));
  EXPECT_TRUE(step.loss_scale.empty());
  ASSERT_FALSE(step.all_finite.empty());
  const DType ft = add_fault_input(step, "fc1.bias_grad");
  EXPECT_EQ(ft, DType::kBFloat16);
  auto exe = compile(step);
  EXPECT_TRUE(run_step(*exe, step, 1, 1, ft).finite);
  const auto before = snapshot(*exe);
  EXPECT_FALSE(run_step(*exe, step, 2, std::numeric_limits<float>::quiet_NaN(), ft).finite);
  for (const auto& [name, t] : before) EXPECT_TRUE(bits_equal(snapshot(*exe).at(name), t)) << name;
}

// Each fp16 gradient is widened and unscaled after the check and next to its own update (the
// late-unscale pass), typed in full so that a backend fusing by shape fuses the unscaling into the
// update; then the fp16 step holds no fp32 copy of every gradient at once.
TEST(LateUnscale, EachGradientIsUnscaledNextToItsUpdateAndNoUpdateIsLiveAtThePeak) {
  TrainingStep step =
      build_training_step(mlp(), spec(DType::kFloat16, LossScaleSpec::Mode::kDynamic, OptimizerSpec::Kind::kSgd));
  const Graph& g = *step.model.graph;
  const std::vector<Node*> order = g.node_vector();
  const Node* check = g.value(step.all_finite)->producer();
  ASSERT_NE(check, nullptr);
  const Value* inverse = check->input(0);
  size_t check_at = 0, unscalings = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] == check) check_at = i;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    if (n->op_type() != "Mul" || n->input(1) != inverse) continue;
    ++unscalings;
    const Node* widen = n->input(0)->producer();
    ASSERT_NE(widen, nullptr);
    EXPECT_EQ(widen->op_type(), "Cast");
    EXPECT_EQ(widen->input(0)->dtype(), DType::kFloat16);
    EXPECT_GT(i, check_at) << n->label() << " unscales before the check";
    ASSERT_GT(i, 0u);
    EXPECT_EQ(order[i - 1], widen) << "the widening comes right before the unscaling";
    ASSERT_LT(i + 1, order.size());
    EXPECT_EQ(order[i + 1]->input(0) == n->output(0) || order[i + 1]->input(1) == n->output(0), true)
        << n->label() << " is not read by the next node, its update";
    EXPECT_TRUE(n->output(0)->type().shape.has_value()) << n->label();
    EXPECT_EQ(n->output(0)->type().shape, widen->input(0)->type().shape) << n->label();
  }
  EXPECT_EQ(unscalings, 6u) << "one per parameter";

  // Run on the CPU backend, the step's peak is not in the updates: no value made after the check
  // (an unscaled gradient, an update's temporary) is live when the plan's live bytes peak.
  std::set<std::string> after_check;
  for (size_t i = check_at + 1; i < order.size(); ++i)
    for (const Value* v : order[i]->outputs())
      if (v) after_check.insert(v->name());
  auto exe = compile(step);
  Feeds feeds = batch(8, 1);
  feeds.emplace_back(step.lr, scalar(1e-3f));
  exe->run(feeds, {step.loss});
  const MemoryStats mem = exe->memory();
  ASSERT_FALSE(mem.peak_live.empty());
  for (const ArenaUse& u : mem.peak_live)
    EXPECT_EQ(after_check.count(u.value), 0u) << u.value << " (" << u.bytes << " bytes) is live at the step's peak";
}

// The loss-scaled check reads the fp16 gradients before unscaling (AllFiniteScaled with 1/scale),
// so the optimizer may unscale inside its own kernel; its verdict is that of the unscaled fp32
// values: a finite fp16 gradient whose unscaled value overflows float32 still skips the step.
TEST(FaultInjection, ScaledCheckReadsLowPrecisionGradientsAndJudgesTheUnscaledValues) {
  TrainingStep step = build_training_step(mlp(), spec(DType::kFloat16, LossScaleSpec::Mode::kDynamic));
  const Node* check = step.model.graph->value(step.all_finite)->producer();
  ASSERT_NE(check, nullptr);
  ASSERT_EQ(check->op_type(), "AllFiniteScaled");
  ASSERT_EQ(check->inputs().size(), 1 + 6u) << "1/scale, then the six gradients";
  for (size_t i = 1; i < check->inputs().size(); ++i) EXPECT_EQ(check->input(i)->dtype(), DType::kFloat16) << i;

  // The kernel alone, against float32 arithmetic: 60000 (finite fp16) * 1e34 overflows float32.
  auto judge = [](float scale, float x, DType t) {
    Model m;
    m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
    Graph& g = *m.graph;
    Value* s = g.add_input("s", ValueType::tensor(DType::kFloat, Shape::of({})));
    Value* v = g.add_input("x", ValueType::tensor(t, Shape::of({3})));
    Node* n = g.add_node("AllFiniteScaled", {s, v}, {"ok"}, kAmpDomain);
    n->output(0)->set_type(ValueType::tensor(DType::kBool, Shape::of({})));
    g.add_output(n->output(0));
    Tensor xs(t, {3});
    for (int i = 0; i < 3; ++i) {
      const float e = i == 1 ? x : 1.0f;
      if (t == DType::kFloat16) xs.mutable_as<uint16_t>()[i] = fp32_to_fp16(e);
      else xs.mutable_as<float>()[i] = e;
    }
    auto exe = make_backend("cpu")->compile(m, CompileOptions{});
    return exe->run({{"s", scalar(scale)}, {"x", xs}}, {"ok"})[0].element(0) != 0;
  };
  const float big = 60000.0f, flt_max = std::numeric_limits<float>::max();
  EXPECT_EQ(judge(1e34f, big, DType::kFloat16), std::isfinite(big * 1e34f));
  EXPECT_FALSE(judge(1e34f, big, DType::kFloat16));
  EXPECT_TRUE(judge(1e30f, big, DType::kFloat16));
  EXPECT_TRUE(judge(0.5f, flt_max, DType::kFloat));
  EXPECT_FALSE(judge(2.0f, flt_max, DType::kFloat)) << "the product is rounded to float32, not computed wider";
  EXPECT_FALSE(judge(1.0f, std::numeric_limits<float>::infinity(), DType::kFloat16));
  EXPECT_FALSE(judge(std::numeric_limits<float>::infinity(), 0.0f, DType::kFloat16)) << "0 * inf is NaN";
}

TEST(LossScale, GrowsAfterTheIntervalWithinItsBoundsAndBacksOffToTheMinimum) {
  TrainingSpec s = spec(DType::kFloat16, LossScaleSpec::Mode::kDynamic);
  s.loss_scale.initial = 1024;
  s.loss_scale.growth_interval = 2;
  s.loss_scale.max_scale = 4096;
  s.loss_scale.min_scale = 256;
  TrainingStep step = build_training_step(mlp(), s);
  const DType ft = add_fault_input(step, "fc3.bias_grad");
  auto exe = compile(step);
  auto scale = [&] { return exe->read_state(StepNames::kLossScale).element(0); };
  std::vector<double> seen;
  for (int i = 0; i < 6; ++i) {
    run_step(*exe, step, i, 1, ft);
    seen.push_back(scale());
  }
  EXPECT_EQ(seen, (std::vector<double>{1024, 2048, 2048, 4096, 4096, 4096}));  // x2 per 2 steps, capped
  seen.clear();
  for (int i = 0; i < 6; ++i) {
    run_step(*exe, step, i, std::numeric_limits<float>::infinity(), ft);
    seen.push_back(scale());
  }
  EXPECT_EQ(seen, (std::vector<double>{2048, 1024, 512, 256, 256, 256}));  // /2 per overflow, floored
}

TEST(LossScale, StaticScaleIsAConstantAndTrainingMatchesTheUnscaledStep) {
  // fp32 with a static scale of 1024 (a power of two: scaling and unscaling are exact) must update
  // the weights exactly as fp32 without scaling.
  TrainingStep plain = build_training_step(mlp(), spec(DType::kFloat, LossScaleSpec::Mode::kNone));
  TrainingStep scaled = build_training_step(mlp(), [] {
    TrainingSpec s = spec(DType::kFloat, LossScaleSpec::Mode::kStatic);
    s.loss_scale.initial = 1024;
    return s;
  }());
  EXPECT_EQ(std::count(scaled.state.begin(), scaled.state.end(), StepNames::kLossScale), 0);
  auto a = compile(plain), b = compile(scaled);
  for (uint32_t i = 0; i < 3; ++i) {
    Feeds f = batch(8, i);
    f.emplace_back(plain.lr, scalar(1e-3f));
    a->run(f, {plain.loss});
    b->run(f, {scaled.loss});
  }
  for (const std::string& p : plain.params) {
    const Tensor x = a->read_state(p), y = b->read_state(p);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(x.element(i), y.element(i), 1e-6) << p;
  }
}

TEST(Accumulation, TwoMicroBatchesTrainLikeOneBatchOfTwiceTheSize) {
  TrainingSpec one = spec(DType::kFloat, LossScaleSpec::Mode::kNone, OptimizerSpec::Kind::kSgd);
  one.optimizer.momentum = 0.9f;
  TrainingSpec two = one;
  two.accumulate = 2;
  TrainingStep big = build_training_step(mlp(), one), micro = build_training_step(mlp(), two);
  ASSERT_FALSE(micro.apply_update.empty());
  auto a = compile(big), b = compile(micro);
  Feeds whole = batch(16, 5);
  for (int step = 0; step < 2; ++step) {
    Feeds f = whole;
    f.emplace_back(big.lr, scalar(0.1f));
    a->run(f, {big.loss});
    for (int half = 0; half < 2; ++half) {
      Feeds h;
      for (const auto& [name, t] : whole) {
        std::vector<int64_t> dims = t.dims;
        dims[0] = 8;
        const size_t bytes = t.nbytes() / 2;
        h.emplace_back(name, Tensor::from_bytes(t.dtype, dims,
                                                std::string(reinterpret_cast<const char*>(t.data()) + half * bytes, bytes)));
      }
      h.emplace_back(micro.lr, scalar(0.1f));
      Tensor apply(DType::kBool, {});
      *apply.mutable_as<bool>() = half == 1;
      h.emplace_back(micro.apply_update, apply);
      const Tensor w_before = b->read_state("fc1.weight");
      b->run(h, {micro.loss});
      if (half == 0) {
        EXPECT_TRUE(bits_equal(b->read_state("fc1.weight"), w_before)) << "updated before the last micro-batch";
      }
    }
  }
  for (const std::string& p : big.params) {
    const Tensor x = a->read_state(p), y = b->read_state(p);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(x.element(i), y.element(i), 2e-6) << p << "[" << i << "]";
  }
}

TEST(Clipping, UpdateHasTheClippedGlobalNorm) {
  TrainingSpec s = spec(DType::kFloat, LossScaleSpec::Mode::kNone, OptimizerSpec::Kind::kSgd);
  s.optimizer.weight_decay = 0;
  s.clip_norm = 0.01f;
  TrainingStep step = build_training_step(mlp(), s);
  ASSERT_FALSE(step.grad_norm.empty());
  auto exe = compile(step);
  const auto before = snapshot(*exe);
  Feeds f = batch(8, 3);
  f.emplace_back(step.lr, scalar(1.0f));
  const double norm = exe->run(f, {step.grad_norm})[0].element(0);
  ASSERT_GT(norm, 0.01);  // the raw gradient is larger than the limit, so clipping acts
  double sq = 0;
  for (const std::string& p : step.params) {
    const Tensor after = exe->read_state(p);
    for (int64_t i = 0; i < after.numel(); ++i) {
      const double d = after.element(i) - before.at(p).element(i);
      sq += d * d;
    }
  }
  // lr 1: the update is the clipped gradient, whose norm is max_norm * norm / (norm + 1e-6).
  EXPECT_NEAR(std::sqrt(sq), 0.01 * norm / (norm + 1e-6), 1e-5);
}

TEST(Freeze, FrozenParametersKeepTheirValuesAndOthersTrain) {
  TrainingSpec s = spec(DType::kFloat, LossScaleSpec::Mode::kNone);
  s.freeze = "fc1\\..*";
  TrainingStep step = build_training_step(mlp(), s);
  EXPECT_EQ(step.params, (std::vector<std::string>{"fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}));
  auto exe = make_backend("cpu")->compile(step.model, CompileOptions{step.state, step.updates, 7, 0});
  const auto before = snapshot(*exe);
  Feeds f = batch(8, 4);
  f.emplace_back(step.lr, scalar(1e-2f));
  exe->run(f, {step.loss});
  for (const auto& [state, next] : step.updates) EXPECT_NE(state.rfind("fc1.", 0), 0u) << state << " is updated";
  EXPECT_FALSE(bits_equal(exe->read_state("fc2.weight"), before.at("fc2.weight")));
  s.freeze = "fc[";
  EXPECT_THROW(build_training_step(mlp(), s), InputError);
  s.freeze = ".*";
  EXPECT_THROW(build_training_step(mlp(), s), InputError);  // nothing left to train
}

// A float initializer whose contents decide a shape — Resize's scales, as torch exports
// F.interpolate(scale_factor=2) — is a constant of the step: not trained (it has no gradient,
// and weight decay would shrink it) and not state, so backends read it while planning.
TEST(Freeze, ResizeScalesAreAConstantNotAParameter) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("images", ValueType::tensor(DType::kFloat, Shape::of({4, 1, 2, 2})));
  Tensor scales(DType::kFloat, {4});
  for (int k = 0; k < 4; ++k) scales.mutable_as<float>()[k] = k < 2 ? 1.0f : 2.0f;
  scales.name = "scales";
  Node* up = g.add_node("Resize", {x, nullptr, g.add_initializer(scales)}, {"up"});
  up->set_attr(Attribute::of_string("mode", "linear"));
  up->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({4, 1, 4, 4})));
  Node* flat = g.add_node("Flatten", {up->output(0)}, {"flat"});
  flat->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({4, 16})));
  Tensor w(DType::kFloat, {16, 10});
  w.name = "fc.weight";
  Node* fc = g.add_node("MatMul", {flat->output(0), g.add_initializer(w)}, {"logits"});
  fc->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({4, 10})));
  g.add_output(fc->output(0));
  const TrainingStep step = build_training_step(std::move(m), spec(DType::kFloat, LossScaleSpec::Mode::kNone));
  EXPECT_EQ(step.params, std::vector<std::string>{"fc.weight"});
  EXPECT_EQ(std::count(step.state.begin(), step.state.end(), "scales"), 0);
}

TEST(TrainingInfo, SavedStepSplitsIntoInferenceAndAlgorithmAndJoinsBack) {
  TrainingStep step = build_training_step(mlp(), spec(DType::kFloat16, LossScaleSpec::Mode::kDynamic));
  auto exe = compile(step);
  Feeds f = batch(8, 1);
  f.emplace_back(step.lr, scalar(1e-3f));
  exe->run(f, {step.loss});
  std::vector<std::pair<std::string, Tensor>> state;
  for (const std::string& name : exe->state_names()) state.emplace_back(name, exe->read_state(name));
  Model saved = to_training_info_model(step, state);
  ASSERT_EQ(saved.training_info.size(), 1u);
  // The inference graph is the forward alone: no loss, no gradient op, the model's one output.
  ASSERT_EQ(saved.graph->outputs().size(), 1u);
  EXPECT_EQ(saved.graph->outputs()[0]->name(), "logits");
  for (const Node* n : saved.graph->nodes()) EXPECT_NE(n->domain(), kAmpDomain) << n->label();
  const std::string path = test::temp_dir("training_info") + "/step.onnx";
  save_model(saved, path);
  Model loaded = load_model(path);  // onnx::checker and shape inference accept it

  // Joined back, the step continues exactly where the original executable is.
  TrainingStep again = step_from_training_info(loaded);
  EXPECT_EQ(again.updates, step.updates);
  EXPECT_FALSE(step.correct.empty());
  EXPECT_EQ(again.correct, step.correct);
  // Every value keeps its type: ONNX's shape inference never reaches the algorithm, so the types
  // travel as value_info (the cuda backend plans its fused kernels from them).
  size_t typed = 0;
  for (const Node* n : step.model.graph->nodes())
    for (const Value* v : n->outputs()) {
      if (!v || v->dtype() == DType::kUndefined) continue;
      const Value* back = again.model.graph->value(v->name());
      ASSERT_NE(back, nullptr) << v->name();
      EXPECT_EQ(back->dtype(), v->dtype()) << v->name() << " made by " << n->label();
      ++typed;
    }
  EXPECT_GT(typed, 50u);
  auto exe2 = make_backend("cpu")->compile(again.model, CompileOptions{again.state, again.updates, 7, 0});
  Feeds g = batch(8, 2);
  g.emplace_back(step.lr, scalar(1e-3f));
  const double l1 = exe->run(g, {step.loss})[0].element(0);
  const double l2 = exe2->run(g, {again.loss})[0].element(0);
  EXPECT_EQ(l1, l2);
  for (const std::string& name : exe->state_names()) EXPECT_TRUE(bits_equal(exe->read_state(name), exe2->read_state(name))) << name;
}

}  // namespace
}  // namespace amp
