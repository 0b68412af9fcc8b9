// Where the CPU executor's memory goes: a state update is applied as soon as nothing reads the old
// state (its value's buffer is then reused, not held to the end of the run) and late otherwise
// (a later reader sees the old state); the executable holds no reference to the model's copy of
// its state; MemoryStats's parts add up to its totals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/model.h"

namespace amp {
namespace {

constexpr int64_t kN = 4096;  // floats per tensor: 16 KiB, well above the arena's alignment

Tensor filled(const std::string& name, float v) {
  Tensor t(DType::kFloat, {kN});
  std::fill(t.mutable_as<float>(), t.mutable_as<float>() + kN, v);
  t.name = name;
  return t;
}

// s_next = s + 1 first; then a chain on x that needs three buffers of kN live at once
// (a = Relu(x), b = Neg(a), y = Add(a, b)); optionally z = s * 2 last, reading the old state
// after its update is made.
Model step_model(bool read_state_late) {
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  Value* s = g.add_initializer(filled("s", 3.0f));
  Value* one = g.add_initializer(filled("one", 1.0f));
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({kN})));
  Value* next = g.add_node("Add", {s, one}, {"s_next"})->output(0);
  Value* a = g.add_node("Relu", {x}, {"a"})->output(0);
  Value* b = g.add_node("Neg", {a}, {"b"})->output(0);
  Value* y = g.add_node("Add", {a, b}, {"y"})->output(0);
  g.add_output(next);
  g.add_output(y);
  if (read_state_late) {
    Value* two = g.add_initializer(filled("two", 2.0f));
    g.add_output(g.add_node("Mul", {s, two}, {"z"})->output(0));
  }
  return m;
}

CompileOptions step_options() {
  CompileOptions o;
  o.state = {"s"};
  o.state_updates = {{"s", "s_next"}};
  return o;
}

size_t live_bytes(const MemoryStats& m) {
  return std::accumulate(m.peak_live.begin(), m.peak_live.end(), size_t{0},
                         [](size_t n, const ArenaUse& b) { return n + b.bytes; });
}

bool live_at_peak(const MemoryStats& m, const std::string& value) {
  return std::any_of(m.peak_live.begin(), m.peak_live.end(), [&](const ArenaUse& b) { return b.value == value; });
}

TEST(CpuMemory, AnUpdateNobodyWaitsForIsAppliedAtOnceAndItsBufferReused) {
  Model m = step_model(false);
  auto exe = make_backend("cpu")->compile(m, step_options());
  const Tensor x = filled("x", -1.5f);
  const auto out = exe->run({{"x", x}}, {"y"});
  EXPECT_EQ(out[0].as<float>()[7], 0.0f);
  EXPECT_EQ(exe->read_state("s").as<float>()[kN - 1], 4.0f);
  const MemoryStats mem = exe->memory();
  // s_next's buffer is free before the chain on x: the arena is the chain's a, b and y (all live
  // while y is computed), not those and s_next.
  EXPECT_FALSE(live_at_peak(mem, "s_next"));
  EXPECT_EQ(mem.arena_bytes, 3 * kN * sizeof(float));
  exe->run({{"x", x}}, {});
  EXPECT_EQ(exe->read_state("s").as<float>()[0], 5.0f);
}

TEST(CpuMemory, AnUpdateWhoseOldStateIsReadLaterWaitsForTheEnd) {
  Model m = step_model(true);
  auto exe = make_backend("cpu")->compile(m, step_options());
  const Tensor x = filled("x", 2.0f);
  for (float before : {3.0f, 4.0f, 5.0f}) {
    // z reads s after s_next is made: it must see this run's s, not the update.
    const auto out = exe->run({{"x", x}}, {"z", "s"});
    EXPECT_EQ(out[0].as<float>()[kN / 2], 2 * before);
    EXPECT_EQ(out[1].as<float>()[0], before);  // a fetched state is the one the run read
    EXPECT_EQ(exe->read_state("s").as<float>()[1], before + 1);
  }
  EXPECT_TRUE(live_at_peak(exe->memory(), "s_next"));
}

TEST(CpuMemory, TheExecutableHoldsNoReferenceToTheModelsCopyOfItsState) {
  Model m = step_model(false);
  auto exe = make_backend("cpu")->compile(m, step_options());
  Value* s = m.graph->value("s");
  Tensor mine = s->initializer();  // shares the model's buffer
  const uint8_t* bytes = mine.data();
  Tensor other(DType::kFloat, {kN});
  m.graph->set_initializer(s, other);  // the model lets go of it
  // Copy on write copies only a shared buffer: the same bytes back means no one else holds them.
  EXPECT_EQ(mine.mutable_data(), bytes);
  // The constant `one` is not state: the executable still reads the model's bytes.
  Tensor one = m.graph->value("one")->initializer();
  const uint8_t* one_bytes = one.data();
  EXPECT_NE(one.mutable_data(), one_bytes);
  EXPECT_EQ(exe->run({{"x", filled("x", 1.0f)}}, {"s_next"})[0].as<float>()[0], 4.0f);
}

// Reshape, Flatten, Squeeze, Unsqueeze and Identity of a value the run computes view its buffer
// instead of copying it, and the buffer lives until the view's last reader: here c views a
// (Reshape, then Identity) and is read after d is made, so d cannot take a's bytes. The arena then
// holds a, d and y, not six buffers. A view is never a state's new value: s_next = Identity(t)
// is copied into s as before.
TEST(CpuMemory, ReshapeLikeStepsViewTheirInputsBuffer) {
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  Tensor square(DType::kInt64, {2});
  square.mutable_as<int64_t>()[0] = square.mutable_as<int64_t>()[1] = 64;  // 64 * 64 = kN
  square.name = "square";
  Value* shape = g.add_initializer(square);
  Value* s = g.add_initializer(filled("s", 3.0f));
  Value* one = g.add_initializer(filled("one", 1.0f));
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({kN})));
  Value* t = g.add_node("Add", {s, one}, {"t"})->output(0);
  Value* next = g.add_node("Identity", {t}, {"s_next"})->output(0);
  Value* a = g.add_node("Relu", {x}, {"a"})->output(0);
  Value* b = g.add_node("Reshape", {a, shape}, {"b"})->output(0);
  Value* c = g.add_node("Identity", {b}, {"c"})->output(0);
  Value* d = g.add_node("Neg", {x}, {"d"})->output(0);
  Value* e = g.add_node("Reshape", {d, shape}, {"e"})->output(0);
  g.add_output(next);
  g.add_output(g.add_node("Add", {c, e}, {"y"})->output(0));
  auto exe = make_backend("cpu")->compile(m, step_options());
  Tensor xs(DType::kFloat, {kN});
  for (int64_t i = 0; i < kN; ++i) xs.mutable_as<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  for (float before : {3.0f, 4.0f}) {
    const auto out = exe->run({{"x", xs}}, {"y", "c"});
    ASSERT_EQ(out[0].dims, (std::vector<int64_t>{64, 64}));
    for (int64_t i = 0; i < kN; ++i) {
      const float v = xs.as<float>()[i];
      ASSERT_EQ(out[0].as<float>()[i], std::max(v, 0.0f) - v) << i;
      ASSERT_EQ(out[1].as<float>()[i], std::max(v, 0.0f)) << i;
    }
    EXPECT_EQ(exe->read_state("s").as<float>()[kN - 1], before + 1);
  }
  // a, d and y; t and s_next (two buffers for the state's update, applied at once) come first.
  const MemoryStats mem = exe->memory();
  EXPECT_EQ(mem.intermediate_bytes, 5 * kN * sizeof(float));
  EXPECT_FALSE(live_at_peak(mem, "b"));
  EXPECT_FALSE(live_at_peak(mem, "c"));
  EXPECT_FALSE(live_at_peak(mem, "e"));
}

// A Shape read while the plan is made keeps no buffer alive: here a is read at run time only by
// Neg, and its Shape (for the Reshape at the end, as a bias Add's gradient sums down to Shape of
// the product before the Add) comes last. The arena holds y1, b and c at its peak, not a too.
TEST(CpuMemory, AShapeReadWhilePlanningKeepsNoBufferAlive) {
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({kN})));
  Value* a = g.add_node("Relu", {x}, {"a"})->output(0);
  Value* y1 = g.add_node("Neg", {a}, {"y1"})->output(0);
  Value* b = g.add_node("Exp", {x}, {"b"})->output(0);
  Value* c = g.add_node("Add", {b, y1}, {"c"})->output(0);
  Value* shape = g.add_node("Shape", {a}, {"shape"})->output(0);
  g.add_output(g.add_node("Reshape", {c, shape}, {"y"})->output(0));
  auto exe = make_backend("cpu")->compile(m, {});
  Tensor xs(DType::kFloat, {kN});
  for (int64_t i = 0; i < kN; ++i) xs.mutable_as<float>()[i] = static_cast<float>(i % 5) - 2.0f;
  const auto out = exe->run({{"x", xs}}, {"y"});
  for (int64_t i = 0; i < kN; ++i) {
    const float v = xs.as<float>()[i];
    ASSERT_EQ(out[0].as<float>()[i], std::exp(v) - std::max(v, 0.0f)) << i;
  }
  const MemoryStats mem = exe->memory();
  EXPECT_FALSE(live_at_peak(mem, "a"));
  EXPECT_EQ(mem.arena_bytes, 3 * kN * sizeof(float));
}

// The cross-entropy's gradient takes the scores' buffer when nothing reads the scores after it
// (Kernel::overwrites_input; GPT-2's logits at 2 x 1024 tokens: 393 MiB): scores = Neg(x) and
// dx = SoftmaxCrossEntropyLossGrad(dLoss, scores, labels) share one buffer, dx equal to
// (softmax(scores) - onehot(label)) / N computed here in double; a later reader of the scores
// (y = scores + dx) keeps them apart, with the same dx.
TEST(CpuMemory, TheLossGradientIsWrittenOverScoresNobodyReadsAfterIt) {
  constexpr int64_t kRows = 64, kClasses = kN / kRows;
  std::vector<Tensor> got;
  for (bool read_later : {false, true}) {
    SCOPED_TRACE(read_later ? "scores read later" : "scores dead after the gradient");
    Model m;
    m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
    Graph& g = *m.graph;
    Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({kRows, kClasses})));
    Value* labels = g.add_input("labels", ValueType::tensor(DType::kInt64, Shape::of({kRows})));
    Value* dloss = g.add_input("dloss", ValueType::tensor(DType::kFloat, Shape::of({})));
    Value* scores = g.add_node("Neg", {x}, {"scores"})->output(0);
    Node* grad = g.add_node("SoftmaxCrossEntropyLossGrad", {dloss, scores, labels}, {"dx"}, kAmpDomain);
    grad->set_attr(Attribute::of_string("reduction", "mean"));
    Value* dx = grad->output(0);
    dx->set_type(ValueType::tensor(DType::kFloat));
    g.add_output(dx);
    std::vector<std::string> fetches = {"dx"};
    if (read_later) {
      g.add_output(g.add_node("Add", {scores, dx}, {"y"})->output(0));
      fetches.push_back("y");
    }
    Tensor xs(DType::kFloat, {kRows, kClasses}), ls(DType::kInt64, {kRows}), one(DType::kFloat, {});
    for (int64_t i = 0; i < kN; ++i) xs.mutable_as<float>()[i] = static_cast<float>((i * 37) % 11) * 0.25f - 1.0f;
    for (int64_t r = 0; r < kRows; ++r) ls.mutable_as<int64_t>()[r] = (r * 5) % kClasses;
    one.mutable_as<float>()[0] = 1.0f;
    auto exe = make_backend("cpu")->compile(m, {});
    const auto out = exe->run({{"x", xs}, {"labels", ls}, {"dloss", one}}, fetches);
    for (int64_t r = 0; r < kRows; ++r) {
      double top = -INFINITY, sum = 0;
      for (int64_t c = 0; c < kClasses; ++c) top = std::max(top, -static_cast<double>(xs.as<float>()[r * kClasses + c]));
      for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(-static_cast<double>(xs.as<float>()[r * kClasses + c]) - top);
      for (int64_t c = 0; c < kClasses; ++c) {
        const double p = std::exp(-static_cast<double>(xs.as<float>()[r * kClasses + c]) - top) / sum;
        const double want = (p - (c == ls.as<int64_t>()[r] ? 1.0 : 0.0)) / kRows;
        ASSERT_NEAR(out[0].as<float>()[r * kClasses + c], want, 1e-7) << r << ", " << c;
      }
    }
    got.push_back(out[0]);
    const MemoryStats mem = exe->memory();
    EXPECT_EQ(mem.arena_bytes, (read_later ? 3 : 1) * kN * sizeof(float));
  }
  EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].nbytes()), 0);
}

TEST(CpuMemory, StatsAddUp) {
  Model m = step_model(true);
  auto exe = make_backend("cpu")->compile(m, step_options());
  exe->run({{"x", filled("x", 1.0f)}}, {"y", "z"});
  const MemoryStats mem = exe->memory();
  ASSERT_EQ(mem.state.size(), 1u);
  EXPECT_EQ(mem.state[0].first, "s");
  EXPECT_EQ(mem.state[0].second, kN * sizeof(float));
  EXPECT_EQ(mem.state_bytes, kN * sizeof(float));
  EXPECT_EQ(live_bytes(mem), mem.peak_bytes);
  EXPECT_LE(mem.peak_bytes, mem.arena_bytes);
  EXPECT_EQ(mem.constant_bytes, 2 * kN * sizeof(float));  // one and two
  exe->trim();
  EXPECT_EQ(exe->memory().arena_bytes, 0u);
  EXPECT_EQ(exe->run({{"x", filled("x", 1.0f)}}, {"z"})[0].as<float>()[0], 2 * 4.0f);
}

}  // namespace
}  // namespace amp
