// Rewrite time of the amp-rewrite pipeline on GPT-2-shaped graphs (d_model 768, 12 heads, MLP 3072,
// 1024 positions, the node pattern PyTorch 1.13 exports at opset 17) of 12, 48 and 192 layers.
// The time must grow linearly with the node count: the per_node counter gives seconds per node and
// Google Benchmark fits the complexity (expect O(N)).
//   build/tests/bench_rewrite
#include <benchmark/benchmark.h>

#include <onnx/defs/schema.h>

#include <map>
#include <memory>
#include <string>

#include "passes/pipelines.h"

namespace amp {
namespace {

constexpr int64_t kModel = 768, kHeads = 12, kHidden = 3072, kSeq = 1024;

class Gpt2Builder {
 public:
  // full_weights: initializers of GPT-2's shapes; otherwise one element each, so that only the
  // graph work is timed (the weight-range scan of insert-casts reads every parameter).
  Gpt2Builder(int layers, bool full_weights) : full_weights_(full_weights) {
    m.set_opset_version("", 17);
    g = m.graph.get();
    Value* tokens = g->add_input("tokens", ValueType::tensor(DType::kInt64, Shape::of({1, kSeq})));
    Value* x = op("Gather", {weight("wte", {50257, kModel}), tokens}, {1, kSeq, kModel});
    x = op("Add", {x, weight("wpe", {kSeq, kModel})}, {1, kSeq, kModel});
    Tensor mask(DType::kBool, {1, 1, kSeq, kSeq});
    mask.name = "causal_mask";
    mask_ = g->add_initializer(std::move(mask));
    scale_ = weight("scale", {});
    for (int l = 0; l < layers; ++l) x = block(x, "h" + std::to_string(l));
    x = layer_norm(x, "ln_f");
    g->add_output(op("MatMul", {x, weight("lm_head", {kModel, 50257})}, {1, kSeq, 50257}));
  }

  Model m;

 private:
  // Every weight is a view of one shared zero buffer: GPT-2 at 192 layers would otherwise hold
  // 5 GB, and the benchmark would measure the machine's memory rather than the rewrite.
  Value* weight(const std::string& name, std::vector<int64_t> dims) {
    static const auto zeros = std::make_shared<OwnedBuffer>(std::string(50257 * kModel * sizeof(float), '\0'));
    if (!full_weights_) dims = {1};
    Tensor t = Tensor::view(DType::kFloat, std::move(dims), zeros, 0);
    t.name = name;
    return g->add_initializer(std::move(t));
  }
  Value* shape(const std::vector<int64_t>& dims) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(dims.size())});
    t.name = "shape_" + std::to_string(serial_++);
    std::copy(dims.begin(), dims.end(), t.mutable_as<int64_t>());
    return g->add_initializer(std::move(t));
  }
  Value* op(const std::string& type, const std::vector<Value*>& inputs, const std::vector<int64_t>& dims,
            DType t = DType::kFloat) {
    // Explicit names: Graph::fresh_name probes suffixes one by one, quadratic over thousands of Adds.
    const std::string name = type + "_" + std::to_string(serial_++);
    Node* n = g->add_node(type, inputs, {name});
    n->name = "/" + name;
    n->output(0)->set_type(ValueType::tensor(t, Shape::of(dims)));
    g->value_info().push_back(n->output(0));
    return n->output(0);
  }
  Value* layer_norm(Value* x, const std::string& p) {
    Value* y = op("LayerNormalization", {x, weight(p + ".g", {kModel}), weight(p + ".b", {kModel})}, {1, kSeq, kModel});
    y->producer()->set_attr(Attribute::of_int("axis", -1));
    return y;
  }
  Value* linear(Value* x, const std::string& p, int64_t in, int64_t out) {
    Value* y = op("MatMul", {x, weight(p + ".w", {in, out})}, {1, kSeq, out});
    return op("Add", {y, weight(p + ".b", {out})}, {1, kSeq, out});
  }
  Value* heads(Value* x) {
    Value* r = op("Reshape", {x, shape({1, kSeq, kHeads, kModel / kHeads})}, {1, kSeq, kHeads, kModel / kHeads});
    Value* t = op("Transpose", {r}, {1, kHeads, kSeq, kModel / kHeads});
    t->producer()->set_attr(Attribute::of_ints("perm", {0, 2, 1, 3}));
    return t;
  }
  Value* block(Value* x, const std::string& p) {
    Value* qkv = linear(layer_norm(x, p + ".ln_1"), p + ".attn.c_attn", kModel, 3 * kModel);
    Node* split = g->add_node("Split", {qkv, shape({kModel, kModel, kModel})}, {p + ".q", p + ".k", p + ".v"});
    split->name = "/" + p + ".split";
    split->set_attr(Attribute::of_int("axis", -1));
    for (Value* v : split->outputs()) {
      v->set_type(ValueType::tensor(DType::kFloat, Shape::of({1, kSeq, kModel})));
      g->value_info().push_back(v);
    }
    Value* q = heads(split->output(0));
    Value* k = heads(split->output(1));
    Value* v = heads(split->output(2));
    Value* kt = op("Transpose", {k}, {1, kHeads, kModel / kHeads, kSeq});
    kt->producer()->set_attr(Attribute::of_ints("perm", {0, 1, 3, 2}));
    Value* att = op("MatMul", {q, kt}, {1, kHeads, kSeq, kSeq});
    att = op("Mul", {att, scale_}, {1, kHeads, kSeq, kSeq});
    att = op("Where", {mask_, att, weight(p + ".neg", {})}, {1, kHeads, kSeq, kSeq});
    att = op("Softmax", {att}, {1, kHeads, kSeq, kSeq});
    Value* y = op("MatMul", {att, v}, {1, kHeads, kSeq, kModel / kHeads});
    y = op("Transpose", {y}, {1, kSeq, kHeads, kModel / kHeads});
    y->producer()->set_attr(Attribute::of_ints("perm", {0, 2, 1, 3}));
    y = op("Reshape", {y, shape({1, kSeq, kModel})}, {1, kSeq, kModel});
    x = op("Add", {x, linear(y, p + ".attn.c_proj", kModel, kModel)}, {1, kSeq, kModel});
    Value* h = linear(layer_norm(x, p + ".ln_2"), p + ".mlp.c_fc", kModel, kHidden);
    // GELU as PyTorch 1.13 exports it: x * 0.5 * (1 + erf(x / sqrt(2)))
    Value* e = op("Erf", {op("Div", {h, weight(p + ".sqrt2", {})}, {1, kSeq, kHidden})}, {1, kSeq, kHidden});
    e = op("Add", {e, weight(p + ".one", {})}, {1, kSeq, kHidden});
    h = op("Mul", {op("Mul", {h, e}, {1, kSeq, kHidden}), weight(p + ".half", {})}, {1, kSeq, kHidden});
    return op("Add", {x, linear(h, p + ".mlp.c_proj", kHidden, kModel)}, {1, kSeq, kModel});
  }

  bool full_weights_;
  int64_t serial_ = 0;
  Graph* g = nullptr;
  Value* mask_ = nullptr;
  Value* scale_ = nullptr;
};

void rewrite_gpt2(benchmark::State& state, bool full_weights) {
  const int layers = static_cast<int>(state.range(0));
  size_t nodes = 0;
  std::map<std::string, double> pass_ms;  // wall time per pass, summed over the pass's runs
  onnx::OpSchemaRegistry::Schema("Add", 17, "");  // ONNX builds its schema table on first use: not ours to time
  // Built and freed while the timer is paused: only the passes are timed.
  std::unique_ptr<Gpt2Builder> gpt;
  std::unique_ptr<AmpResult> result;
  std::unique_ptr<PassManager> pm;
  auto collect = [&] {
    if (pm)
      for (const PassRun& r : pm->runs()) pass_ms[r.name] += r.seconds * 1e3;
  };
  for (auto _ : state) {
    state.PauseTiming();
    collect();
    pm.reset();
    result.reset();
    gpt = std::make_unique<Gpt2Builder>(layers, full_weights);
    nodes = gpt->m.graph->num_nodes();
    result = std::make_unique<AmpResult>();
    pm = std::make_unique<PassManager>(amp_rewrite_pipeline(AmpPolicy(), *result, /*verify_each=*/false));
    state.ResumeTiming();
    pm->run(gpt->m);
  }
  collect();
  for (const auto& [pass, ms] : pass_ms) state.counters[pass + "_ms"] = ms / static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(nodes);
  // Seconds per node (printed with an SI prefix: "2.5u" is 2.5 microseconds).
  state.counters["per_node"] = benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                                              benchmark::Counter::kInvert);
  state.SetComplexityN(static_cast<int64_t>(nodes));
}

// The whole amp-rewrite pipeline on GPT-2 with its real weight shapes (124M parameters at 12 layers).
void BM_RewriteGpt2(benchmark::State& state) { rewrite_gpt2(state, true); }
// The same graphs with one-element weights: the graph work alone.
void BM_RewriteGpt2GraphOnly(benchmark::State& state) { rewrite_gpt2(state, false); }

BENCHMARK(BM_RewriteGpt2)->Arg(12)->Arg(48)->Arg(192)->Unit(benchmark::kMillisecond)->Complexity(benchmark::oN);
BENCHMARK(BM_RewriteGpt2GraphOnly)->Arg(12)->Arg(48)->Arg(192)->Unit(benchmark::kMillisecond)->Complexity(benchmark::oN);

}  // namespace
}  // namespace amp

BENCHMARK_MAIN();
