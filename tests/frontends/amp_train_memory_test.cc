// amp-train --memory-report: the parts of the last --metrics record add up (the arena's parts to
// the arena, everything to the peak resident memory), the state parts are what the checkpoint
// holds and the weights what the model file holds; --save, made from the backend's state at the
// end (no copy of the model is kept for it), writes the checkpoint's weights.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string tool(const std::string& name) { return test::binary_dir() + "/" + name; }
std::string model(const std::string& name) { return test::source_dir() + "/models/" + name + ".train.onnx"; }

void write_data(const std::string& path, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  write_npz(path, {{"input", x}, {"labels", y}});
}

nlohmann::json last_record(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

size_t bytes_of(const std::vector<std::pair<std::string, Tensor>>& arrays) {
  size_t n = 0;
  for (const auto& [name, t] : arrays)
    if (name != "__position__") n += t.nbytes();
  return n;
}

class AmpTrainMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_data(dir_ + "/train.npz", 64, 1);
    write_data(dir_ + "/val.npz", 16, 2);
  }
  // Runs mlp with --memory-report; returns the "memory" record.
  nlohmann::json run(const std::string& name, const std::string& extra) {
    std::string out;
    const std::string args = model("mlp") + " --data " + dir_ + "/train.npz --loss cross_entropy --batch-size 16 --steps 4 " +
                             "--optimizer adamw --lr 0.001 --seed 3 --memory-report --metrics " + dir_ + "/" + name +
                             ".jsonl --checkpoint " + dir_ + "/" + name + " " + extra;
    EXPECT_EQ(test::run_command(tool("amp-train") + " " + args, &out), 0) << out;
    for (const char* part : {"weights (fp32 state)", "optimizer state", "gradients and backward temporaries",
                             "everything else", "peak RSS", "the largest buffers at the arena's peak:"})
      EXPECT_NE(out.find(part), std::string::npos) << part << "\n" << out;
    const nlohmann::json r = last_record(dir_ + "/" + name + ".jsonl");
    EXPECT_TRUE(r.contains("memory")) << r.dump();
    return r["memory"];
  }
  std::string dir_;
};

TEST_F(AmpTrainMemory, PartsAddUpToTheStateTheArenaAndThePeak) {
  size_t model_bytes = 0;
  const Model original = load_model(model("mlp"));
  for (const Value* v : original.graph->initializers()) model_bytes += v->initializer().nbytes();
  for (const char* dtype : {"fp32", "fp16"}) {
    SCOPED_TRACE(dtype);
    const nlohmann::json m = run(dtype, std::string("--dtype ") + dtype + " --val " + dir_ + "/val.npz");
    auto at = [&](const char* key) { return m.at(key).get<size_t>(); };
    // The state: the model's weights as the file holds them, and the rest (AdamW's moments, its
    // step count, fp16's loss scale) — together what the checkpoint holds.
    EXPECT_EQ(at("weights"), model_bytes);
    EXPECT_GE(at("optimizer_state"), 2 * model_bytes);
    EXPECT_EQ(at("weights") + at("optimizer_state"), bytes_of(read_npz(dir_ + "/" + dtype + "/checkpoint.npz")));
    // The arena: the buffers live at its peak by kind, and what no buffer holds then.
    EXPECT_GT(at("arena"), 0u);
    EXPECT_GT(at("gradients"), 0u);
    EXPECT_EQ(at("low_precision_weights") + at("gradients") + at("activations") + at("kernel_scratch") +
                  at("arena_unused_at_peak"),
              at("arena"));
    if (std::string(dtype) == "fp32") {
      EXPECT_EQ(at("low_precision_weights"), 0u);
    }
    EXPECT_GT(at("validation"), 0u);
    EXPECT_GT(at("peak_rss"), at("weights") + at("optimizer_state") + at("arena"));
    EXPECT_EQ(at("weights") + at("optimizer_state") + at("arena") + at("constants") + at("validation") + at("other"),
              at("peak_rss"));
  }
}

TEST_F(AmpTrainMemory, SaveWritesTheTrainedStateWithoutAKeptCopyOfTheModel) {
  run("saved", "--save " + dir_ + "/saved.onnx --save-training-graph " + dir_ + "/step.onnx");
  const auto state = read_npz(dir_ + "/saved/checkpoint.npz");
  const Model saved = load_model(dir_ + "/saved.onnx");
  const Model original = load_model(model("mlp"));
  ASSERT_EQ(saved.graph->initializers().size(), original.graph->initializers().size());
  for (const Value* v : saved.graph->initializers()) {
    const auto it = std::find_if(state.begin(), state.end(), [&](const auto& a) { return a.first == v->name(); });
    ASSERT_NE(it, state.end()) << v->name();
    EXPECT_TRUE(v->initializer().same_contents(it->second)) << v->name();
    EXPECT_FALSE(v->initializer().same_contents(original.graph->value(v->name())->initializer())) << v->name() << " trained";
  }
  // The saved step holds the trained state too (its initializers were released after compiling
  // and put back from the backend for the save): the weights in its main graph.
  const Model step = load_model(dir_ + "/step.onnx");
  size_t compared = 0;
  for (const auto& [name, t] : state) {
    const Value* v = step.graph->value(name);
    if (name == "__position__" || !v || !v->has_initializer()) continue;
    EXPECT_TRUE(v->initializer().same_contents(t)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, original.graph->initializers().size());
}

}  // namespace
}  // namespace amp
