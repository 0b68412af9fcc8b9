// The CPU executor around the kernels: plans per input-shape signature, shapes computed from
// values at plan time, the liveness arena, resident state with in-place updates, partial fetches,
// seeded Dropout, the errors a user sees, and make_backend's device choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backends/memory_plan.h"
#include "graph/error.h"
#include "tests/backends/kernel_case.h"

namespace amp::test {
namespace {

Tensor floats(std::vector<int64_t> dims, std::vector<float> values) {
  Tensor t(DType::kFloat, std::move(dims));
  std::copy(values.begin(), values.end(), t.mutable_as<float>());
  return t;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// x [N, 6] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [2, 3])) -> [N, 2, 3]: the
// reshape target is computed from x's shape, the way PyTorch exports view(x.size(0), 2, 3).
Model shape_chain_model() {
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape{{Dim::symbol("N"), Dim::fixed(6)}}));
  Tensor zero = int64_tensor({0}), tail = int64_tensor({2, 3});
  zero.name = "zero";
  tail.name = "tail";
  Value* z = g.add_initializer(zero);
  Value* t = g.add_initializer(tail);
  Value* shape = g.add_node("Shape", {x}, {"shape"})->output(0);
  Tensor idx(DType::kInt64, {});
  idx.name = "idx";
  Value* n = g.add_node("Gather", {shape, g.add_initializer(idx)}, {"n"})->output(0);
  Value* n1 = g.add_node("Unsqueeze", {n, z}, {"n1"})->output(0);
  Node* cat = g.add_node("Concat", {n1, t}, {"target"});
  cat->set_attr(Attribute::of_int("axis", 0));
  Value* y = g.add_node("Reshape", {x, cat->output(0)}, {"y"})->output(0);
  Value* r = g.add_node("Relu", {y}, {"r"})->output(0);
  g.add_output(r);
  return m;
}

TEST(CpuExecutor, ReshapeTargetsComputedFromShapesFollowTheBatch) {
  Model m = shape_chain_model();
  auto exe = make_backend("cpu")->compile(m, {});
  for (int64_t n : {1, 4, 3, 4}) {
    Tensor x(DType::kFloat, {n, 6});
    for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = static_cast<float>(i % 5) - 2.0f;
    const auto out = exe->run({{"x", x}}, {"r", "target"});
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{n, 2, 3}));
    EXPECT_EQ(out[1].dims, (std::vector<int64_t>{3}));
    EXPECT_EQ(out[1].as<int64_t>()[0], n);
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_EQ(out[0].as<float>()[i], std::max(0.0f, x.as<float>()[i])) << "batch " << n << " element " << i;
  }
}

TEST(CpuExecutor, StateIsUpdatedInPlaceFromOutputs) {
  // counter <- counter + step, total <- total + x * counter: a tiny "training step".
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  Tensor counter = floats({1}, {0.0f}), step = floats({1}, {1.0f}), total = floats({2}, {0.0f, 0.0f});
  counter.name = "counter";
  step.name = "step";
  total.name = "total";
  Value* c = g.add_initializer(counter);
  Value* s = g.add_initializer(step);
  Value* t = g.add_initializer(total);
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2})));
  Value* c1 = g.add_node("Add", {c, s}, {"counter_next"})->output(0);
  Value* xc = g.add_node("Mul", {x, c1}, {"xc"})->output(0);
  Value* t1 = g.add_node("Add", {t, xc}, {"total_next"})->output(0);
  g.add_output(c1);
  g.add_output(t1);
  CompileOptions opts;
  opts.state = {"counter", "total"};
  opts.state_updates = {{"counter", "counter_next"}, {"total", "total_next"}};
  auto exe = make_backend("cpu")->compile(m, opts);
  EXPECT_EQ(exe->state_names(), (std::vector<std::string>{"counter", "total"}));
  const Tensor xv = floats({2}, {1.0f, 10.0f});
  for (int i = 0; i < 3; ++i) exe->run({{"x", xv}}, {});  // no fetches: only the updates run
  EXPECT_EQ(exe->read_state("counter").as<float>()[0], 3.0f);
  EXPECT_EQ(exe->read_state("total").as<float>()[1], 10.0f * (1 + 2 + 3));
  exe->write_state("counter", floats({1}, {100.0f}));
  const auto out = exe->run({{"x", xv}}, {"counter_next"});
  EXPECT_EQ(out[0].as<float>()[0], 101.0f);
  EXPECT_EQ(exe->read_state("counter").as<float>()[0], 101.0f);
  EXPECT_EQ(exe->memory().state_bytes, 12u);
  EXPECT_NE(error_of([&] { exe->read_state("step"); }).find("no state named 'step'"), std::string::npos);
  EXPECT_NE(error_of([&] { exe->write_state("counter", int64_tensor({1})); }).find("is float, got int64"),
            std::string::npos);
}

TEST(CpuExecutor, WrittenStateIsSeenByTheNextRunAndTheModelStaysUntouched) {
  // w is state that no run updates: it shares the model's bytes until write_state replaces them.
  Model m;
  m.set_opset_version("", 17);
  Tensor w = floats({2}, {2.0f, 3.0f});
  w.name = "w";
  Value* wv = m.graph->add_initializer(w);
  Value* x = m.graph->add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2})));
  m.graph->add_output(m.graph->add_node("Mul", {x, wv}, {"y"})->output(0));
  auto exe = make_backend("cpu")->compile(m, {});
  const Tensor ones = floats({2}, {1.0f, 1.0f});
  EXPECT_EQ(exe->run({{"x", ones}}, {"y"})[0].as<float>()[1], 3.0f);
  exe->write_state("w", floats({2}, {5.0f, 7.0f}));
  EXPECT_EQ(exe->run({{"x", ones}}, {"y"})[0].as<float>()[1], 7.0f);
  EXPECT_EQ(m.graph->value("w")->initializer().as<float>()[1], 3.0f);
  exe->write_state("w", floats({3}, {1.0f, 1.0f, 1.0f}));  // a new shape re-plans
  EXPECT_NE(error_of([&] { exe->run({{"x", ones}}, {"y"}); }).find("do not broadcast"), std::string::npos);
}

TEST(CpuExecutor, UnsupportedOpIsRejectedAtCompileNamingFileNodeAndOp) {
  Model m = one_node_model("LpNormalization", {{"x", Tensor(DType::kFloat, {1, 2, 4})}}, {});
  m.path = "models/detector.onnx";
  const std::string err = error_of([&] { make_backend("cpu")->compile(m, {}); });
  EXPECT_NE(err.find("models/detector.onnx: node LpNormalization_under_test (LpNormalization)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("op LpNormalization is not supported by the cpu backend"), std::string::npos) << err;
  Model typed = one_node_model("Sqrt", {{"x", Tensor(DType::kInt64, {3})}}, {});
  EXPECT_NE(error_of([&] { make_backend("cpu")->compile(typed, {}); }).find("op Sqrt does not take int64"),
            std::string::npos);
}

TEST(CpuExecutor, BadFeedsAndFetchesAreInputErrors) {
  Model m = shape_chain_model();
  m.path = "chain.onnx";
  auto exe = make_backend("cpu")->compile(m, {});
  EXPECT_NE(error_of([&] { exe->run({}, {"r"}); }).find("chain.onnx: input 'x' is needed but not fed"), std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"x", Tensor(DType::kDouble, {2, 6})}}, {"r"}); })
                .find("input 'x' expects float[N,6], got double[2,6]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"x", Tensor(DType::kFloat, {2, 5})}}, {"r"}); }).find("got float[2,5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"nope", Tensor(DType::kFloat, {2, 6})}}, {"r"}); })
                .find("'nope' is not an input of the graph"),
            std::string::npos);
  EXPECT_NE(error_of([&] { exe->run({{"x", Tensor(DType::kFloat, {2, 6})}}, {"missing"}); })
                .find("no value named 'missing' to fetch"),
            std::string::npos);
  // A runtime failure inside a kernel names the node.
  Model gather = one_node_model("Gather", {{"x", Tensor(DType::kFloat, {3})}, {"i", int64_tensor({5})}}, {});
  EXPECT_NE(error_of([&] { run_cpu(gather, {{"x", Tensor(DType::kFloat, {3})}, {"i", int64_tensor({5})}}); })
                .find("node Gather_under_test (Gather): Gather index 5 is out of range"),
            std::string::npos);
}

TEST(CpuExecutor, DropoutIsSeededAndScalesKeptElements) {
  Tensor x(DType::kFloat, {100000});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = 1.0f + static_cast<float>(i % 7);
  Tensor ratio = floats({}, {0.25f}), training(DType::kBool, {});
  training.mutable_data()[0] = 1;
  Model m = one_node_model("Dropout", {{"x", x}, {"ratio", ratio}, {"training", training}}, {}, 2);
  CompileOptions opts;
  opts.seed = 1234;
  auto a = make_backend("cpu")->compile(m, opts);
  auto b = make_backend("cpu")->compile(m, opts);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"ratio", ratio}, {"training", training}};
  const auto first = a->run(feeds, {"y", "y1"});
  const auto again = b->run(feeds, {"y", "y1"});
  const auto second = a->run(feeds, {"y", "y1"});
  EXPECT_TRUE(first[1].same_contents(again[1])) << "same seed, same run: same mask";
  EXPECT_FALSE(first[1].same_contents(second[1])) << "the next run draws a new mask";
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = first[1].as<bool>()[i];
    kept += keep;
    EXPECT_FLOAT_EQ(first[0].as<float>()[i], keep ? x.as<float>()[i] / 0.75f : 0.0f);
  }
  EXPECT_NEAR(static_cast<double>(kept) / x.numel(), 0.75, 0.01);
  training.mutable_data()[0] = 0;
  const auto eval = a->run({{"x", x}, {"ratio", ratio}, {"training", training}}, {"y", "y1"});
  EXPECT_TRUE(eval[0].same_contents(x));
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_TRUE(eval[1].as<bool>()[i]);
}

TEST(MemoryPlan, OverlappingLifetimesNeverShareBytes) {
  std::mt19937 gen(7);
  std::vector<BufferLife> lives;
  for (int i = 0; i < 300; ++i) {
    const int64_t first = gen() % 100;
    lives.push_back({static_cast<size_t>(gen() % 5000), first, first + static_cast<int64_t>(gen() % 10)});
  }
  const ArenaPlan plan = plan_arena(lives);
  for (size_t i = 0; i < lives.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % 64, 0u);
    EXPECT_LE(plan.offsets[i] + lives[i].bytes, plan.arena_bytes);
    for (size_t j = i + 1; j < lives.size(); ++j) {
      const bool same_time = lives[i].first <= lives[j].last && lives[j].first <= lives[i].last;
      const bool same_bytes = plan.offsets[i] < plan.offsets[j] + lives[j].bytes &&
                              plan.offsets[j] < plan.offsets[i] + lives[i].bytes;
      EXPECT_FALSE(same_time && same_bytes && lives[i].bytes && lives[j].bytes) << i << " and " << j;
    }
  }
  EXPECT_GE(plan.arena_bytes, plan.peak_bytes);
  EXPECT_LT(plan.arena_bytes, plan.total_bytes / 4);
}

TEST(MakeBackend, CpuAlwaysCudaOnlyWithADevice) {
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
  const std::string auto_name = make_backend("auto")->name();
  EXPECT_TRUE(auto_name == "cpu" || auto_name == "cuda");
  try {
    auto cuda = make_backend("cuda");
    EXPECT_EQ(cuda->name(), "cuda");
    std::string why;
    EXPECT_TRUE(cuda->available(&why)) << why;
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cuda backend not available: ", 0), 0u) << e.what();
    EXPECT_EQ(auto_name, "cpu");
  }
  EXPECT_NE(error_of([] { make_backend("tpu"); }).find("unknown device 'tpu'"), std::string::npos);
}

}  // namespace
}  // namespace amp::test
