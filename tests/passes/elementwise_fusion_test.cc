// Elementwise fusion, before/expected: which nodes become one FusedElementwise node, which values
// stay outputs, which constants are inlined; and that the fused graph computes bit for bit what the
// unfused graph computes when every op rounds to its output type (fp16/bf16 after each op, the way
// separate kernels would). The unfused reference is an op-by-op evaluator written here, independent
// of the fused program interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "graph/fast_math.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/model.h"
#include "graph/ops/elementwise_program_eval.h"
#include "graph/verify.h"
#include "passes/fusion/elementwise_fusion.h"
#include "tests/support/graph_counts.h"

namespace amp {
namespace {

// ---- building graphs

struct Builder {
  Model m;
  Graph& g = *m.graph;
  Builder() {
    m.opset_imports = {{"", 17}};
    g.name = "g";
  }
  static Shape shape(const std::vector<std::string>& dims) {
    Shape s;
    for (const auto& d : dims) s.dims.push_back(std::isdigit(static_cast<unsigned char>(d[0])) ? Dim::fixed(std::stoll(d)) : Dim::symbol(d));
    return s;
  }
  Value* input(const std::string& name, DType t, const std::vector<std::string>& dims) {
    return g.add_input(name, ValueType::tensor(t, shape(dims)));
  }
  Value* node(const std::string& op, std::vector<Value*> ins, DType t, const std::vector<std::string>& dims,
              const std::string& out_name = "") {
    Node* n = g.add_node(op, ins, {out_name.empty() ? g.fresh_name(op) : out_name});
    n->name = op + "_" + std::to_string(g.num_nodes());
    n->output(0)->set_type(ValueType::tensor(t, shape(dims)));
    return n->output(0);
  }
  Value* cast(Value* x, DType to, const std::vector<std::string>& dims) {
    Value* y = node("Cast", {x}, to, dims);
    y->producer()->set_attr(Attribute::of_int("to", static_cast<int64_t>(to)));
    return y;
  }
  Value* constant(float v, DType t) {
    Tensor c(t, {});
    if (t == DType::kFloat) c.mutable_as<float>()[0] = v;
    else if (t == DType::kFloat16) c.mutable_as<uint16_t>()[0] = fp32_to_fp16(v);
    else if (t == DType::kBFloat16) c.mutable_as<uint16_t>()[0] = fp32_to_bf16(v);
    Node* n = g.add_node("Constant", {}, {g.fresh_name("const")});
    n->set_attr(Attribute::of_tensor("value", c));
    n->output(0)->set_type(ValueType::tensor(t, Shape::of({})));
    return n->output(0);
  }
  Value* initializer(const std::string& name, Tensor t) {
    t.name = name;
    return g.add_initializer(std::move(t));
  }
};

using test::count_op;

// ---- the unfused reference: op by op, fp32 math, each result rounded to its output type

float to_storage_and_back(float v, DType t) {
  if (t == DType::kFloat16) return fp16_to_fp32(fp32_to_fp16(v));
  if (t == DType::kBFloat16) return bf16_to_fp32(fp32_to_bf16(v));
  if (t == DType::kBool) return v != 0 ? 1.0f : 0.0f;
  return v;
}

struct RefTensor {
  DType dtype;
  std::vector<int64_t> dims;
  std::vector<float> v;  // values as stored, widened
};

RefTensor ref_of(const Tensor& t) {
  RefTensor r{t.dtype, t.dims, {}};
  for (int64_t i = 0; i < t.numel(); ++i) r.v.push_back(static_cast<float>(t.element(i)));
  return r;
}

// exp and erf are the ones every kernel calls (graph/fast_math.h, checked against libm in
// tests/graph/fast_math_test.cc): this reference stands for the unfused kernels.
float ref_op(const std::string& op, const Node& n, float a, float b, float c) {
  if (op == "Cast" || op == "Identity") return a;
  if (op == "Sigmoid") return 1.0f / (1.0f + fast_exp(-a));
  if (op == "Relu") return std::isnan(a) ? a : std::max(a, 0.0f);
  if (op == "Erf") return fast_erf(a);
  if (op == "Tanh") return std::tanh(a);
  if (op == "Exp") return fast_exp(a);
  if (op == "Neg") return -a;
  if (op == "LeakyRelu") return a >= 0 || std::isnan(a) ? a : a * n.attr_float("alpha", 0.01f);
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Greater") return a > b;
  if (op == "Where") return a != 0 ? b : c;
  ADD_FAILURE() << "reference has no " << op;
  return 0;
}

// numpy broadcasting by coordinates, written independently of broadcast_strides.
RefTensor ref_elementwise(const Node& n, const std::vector<const RefTensor*>& in) {
  size_t rank = 0;
  for (auto* t : in) rank = std::max(rank, t->dims.size());
  std::vector<int64_t> out(rank, 1);
  for (auto* t : in)
    for (size_t k = 0; k < t->dims.size(); ++k) out[rank - t->dims.size() + k] = std::max(out[rank - t->dims.size() + k], t->dims[k]);
  int64_t numel = 1;
  for (int64_t d : out) numel *= d;
  RefTensor r{n.output(0)->dtype(), out, std::vector<float>(static_cast<size_t>(numel))};
  for (int64_t i = 0; i < numel; ++i) {
    float args[3] = {0, 0, 0};
    for (size_t a = 0; a < in.size(); ++a) {
      int64_t rem = i, off = 0, mul = 1;
      for (size_t d = rank; d-- > 0;) {
        const int64_t coord = rem % out[d];
        rem /= out[d];
        const ptrdiff_t k = static_cast<ptrdiff_t>(d) - static_cast<ptrdiff_t>(rank - in[a]->dims.size());
        if (k < 0) continue;
        const int64_t size = in[a]->dims[static_cast<size_t>(k)];
        off += (size == 1 ? 0 : coord) * mul;
        mul *= size;
      }
      args[a] = in[a]->v[static_cast<size_t>(off)];
    }
    r.v[static_cast<size_t>(i)] = to_storage_and_back(ref_op(n.op_type(), n, args[0], args[1], args[2]), r.dtype);
  }
  return r;
}

// Runs a graph: FusedElementwise nodes through evaluate_elementwise_program, everything else
// through the reference. Returns the graph outputs by name.
std::map<std::string, RefTensor> run_graph(const Graph& g, const std::map<std::string, Tensor>& feeds) {
  std::map<const Value*, RefTensor> env;
  std::map<const Value*, Tensor> tensors;  // for FusedElementwise inputs
  for (const Value* v : g.inputs()) {
    tensors[v] = feeds.at(v->name());
    env[v] = ref_of(feeds.at(v->name()));
  }
  for (const Value* v : g.initializers()) {
    tensors[v] = v->initializer();
    env[v] = ref_of(v->initializer());
  }
  auto to_tensor = [](const RefTensor& r) {
    Tensor t(r.dtype, r.dims);
    for (size_t i = 0; i < r.v.size(); ++i) {
      if (r.dtype == DType::kFloat) t.mutable_as<float>()[i] = r.v[i];
      else if (r.dtype == DType::kFloat16) t.mutable_as<uint16_t>()[i] = fp32_to_fp16(r.v[i]);
      else if (r.dtype == DType::kBFloat16) t.mutable_as<uint16_t>()[i] = fp32_to_bf16(r.v[i]);
      else t.mutable_as<uint8_t>()[i] = r.v[i] != 0;
    }
    return t;
  };
  for (const Node* n : g.nodes()) {
    if (n->op_type() == "Constant") {
      tensors[n->output(0)] = n->attr("value")->t;
      env[n->output(0)] = ref_of(n->attr("value")->t);
    } else if (n->op_type() == kFusedElementwiseOp) {
      const auto p = ElementwiseProgram::parse(n->attr_string("program", ""));
      std::vector<const Tensor*> ins;
      for (const Value* v : n->inputs()) {
        if (!tensors.count(v)) tensors[v] = to_tensor(env.at(v));
        ins.push_back(&tensors.at(v));
      }
      auto outs = evaluate_elementwise_program(p, ins, n->label());
      for (size_t k = 0; k < outs.size(); ++k) {
        env[n->output(k)] = ref_of(outs[k]);
        tensors[n->output(k)] = std::move(outs[k]);
      }
    } else if (n->op_type() == "MatMul") {  // a non-fusable op between groups; a plain product
      const RefTensor &a = env.at(n->input(0)), &b = env.at(n->input(1));
      const int64_t M = a.dims[0], K = a.dims[1], N = b.dims[1];
      RefTensor r{n->output(0)->dtype(), {M, N}, std::vector<float>(static_cast<size_t>(M * N))};
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float s = 0;
          for (int64_t k = 0; k < K; ++k) s += a.v[static_cast<size_t>(i * K + k)] * b.v[static_cast<size_t>(k * N + j)];
          r.v[static_cast<size_t>(i * N + j)] = to_storage_and_back(s, r.dtype);
        }
      env[n->output(0)] = r;
    } else {
      std::vector<const RefTensor*> ins;
      for (const Value* v : n->inputs()) ins.push_back(&env.at(v));
      env[n->output(0)] = ref_elementwise(*n, ins);
    }
  }
  std::map<std::string, RefTensor> out;
  for (const Value* v : g.outputs()) out[v->name()] = env.at(v);
  return out;
}

// Random values of type t with the awkward ones mixed in: signed zeros, infinities, NaN, values
// past fp16's range and in its subnormal range.
Tensor random_tensor(DType t, std::vector<int64_t> dims, uint32_t seed, float scale = 4.0f) {
  Tensor x(t, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 70000.0f, -1e-6f, 3e-5f};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = (i % 13 == 5) ? specials[(i / 13) % 8] : u(rng);
    if (t == DType::kFloat) x.mutable_as<float>()[i] = v;
    else if (t == DType::kFloat16) x.mutable_as<uint16_t>()[i] = fp32_to_fp16(v);
    else if (t == DType::kBFloat16) x.mutable_as<uint16_t>()[i] = fp32_to_bf16(v);
    else x.mutable_as<uint8_t>()[i] = (rng() & 1) != 0;
  }
  return x;
}

// Bitwise equality of the stored values; NaN matches NaN.
void expect_same(const RefTensor& got, const RefTensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.v.size(); ++i) {
    const bool same = (std::isnan(got.v[i]) && std::isnan(want.v[i])) ||
                      (got.v[i] == want.v[i] && std::signbit(got.v[i]) == std::signbit(want.v[i]));
    if (!same && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: fused " << got.v[i] << ", unfused " << want.v[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

// Runs `build` twice: one copy stays unfused (the reference), the other goes through the pass.
template <class Build>
void expect_fusion_preserves_results(Build build, const std::map<std::string, Tensor>& feeds, size_t expected_groups) {
  Builder unfused, fused;
  build(unfused);
  build(fused);
  ElementwiseFusion pass;
  EXPECT_EQ(pass.run(fused.m), expected_groups > 0);
  EXPECT_EQ(count_op(*fused.m.graph, kFusedElementwiseOp), expected_groups);
  const auto problems = verify(fused.m);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const auto want = run_graph(*unfused.m.graph, feeds);
  const auto got = run_graph(*fused.m.graph, feeds);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << "fused graph lost output " << name;
    expect_same(got.at(name), t, name);
  }
}

const DType kFloatTypes[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16};

// ---- before / expected

// x * sigmoid(x) computed in fp32 between Casts, the way amp's cast insertion leaves it.
void build_swish_with_casts(Builder& b, DType t) {
  Value* x = b.input("x", t, {"N", "8"});
  Value* x32 = b.cast(x, DType::kFloat, {"N", "8"});
  Value* s = b.node("Sigmoid", {x32}, DType::kFloat, {"N", "8"});
  Value* m = b.node("Mul", {x32, s}, DType::kFloat, {"N", "8"});
  b.g.add_output(b.cast(m, t, {"N", "8"}));
}

TEST(ElementwiseFusion, SwishBetweenCastsBecomesOneNodeAndCastsVanish) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    Builder b;
    build_swish_with_casts(b, t);
    const std::string out_name = b.g.outputs()[0]->name();
    ElementwiseFusion pass;
    ASSERT_TRUE(pass.run(b.m));
    ASSERT_EQ(b.g.num_nodes(), 1u);
    const Node* fused = *b.g.nodes().begin();
    EXPECT_EQ(fused->op_type(), kFusedElementwiseOp);
    EXPECT_EQ(fused->domain(), kAmpDomain);
    EXPECT_EQ(fused->doc_string, "Cast+Sigmoid+Mul+Cast");
    EXPECT_EQ(b.g.outputs()[0]->name(), out_name) << "the graph output keeps its name";
    EXPECT_EQ(b.g.outputs()[0]->dtype(), t);
    EXPECT_EQ(b.m.opset_version(kAmpDomain), 1);
    EXPECT_EQ(pass.stats().at("nodes_fused"), 4);
    EXPECT_EQ(pass.stats().at("casts_absorbed"), 2);
    const auto p = ElementwiseProgram::parse(fused->attr_string("program", ""));
    EXPECT_EQ(p.input_dtypes, std::vector<DType>{t});
    EXPECT_EQ(p.output_dtypes(), std::vector<DType>{t});
  }
}

TEST(ElementwiseFusion, SwishBetweenCastsMatchesUnfused) {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    expect_fusion_preserves_results([t](Builder& b) { build_swish_with_casts(b, t); },
                                    {{"x", random_tensor(t, {5, 8}, 1)}}, 1);
}

void build_add_relu(Builder& b, DType t) {
  Tensor bias = random_tensor(t, {16}, 7);
  Value* x = b.input("x", t, {"N", "16"});
  Value* bv = b.initializer("bias", bias);
  Value* y = b.node("Add", {x, bv}, t, {"N", "16"});
  b.g.add_output(b.node("Relu", {y}, t, {"N", "16"}, "y"));
}

TEST(ElementwiseFusion, AddReluWithBroadcastBiasKeepsTheBiasAnInput) {
  Builder b;
  build_add_relu(b, DType::kFloat);
  ElementwiseFusion pass;
  ASSERT_TRUE(pass.run(b.m));
  ASSERT_EQ(b.g.num_nodes(), 1u);
  const Node* fused = *b.g.nodes().begin();
  ASSERT_EQ(fused->inputs().size(), 2u);
  EXPECT_EQ(fused->input(0)->name(), "x");
  EXPECT_EQ(fused->input(1)->name(), "bias") << "initializers are state, never inlined";
  EXPECT_EQ(fused->output(0)->name(), "y");
}

TEST(ElementwiseFusion, AddReluWithBroadcastMatchesUnfused) {
  for (DType t : kFloatTypes)
    expect_fusion_preserves_results([t](Builder& b) { build_add_relu(b, t); }, {{"x", random_tensor(t, {6, 16}, 2)}}, 1);
}

// models/gpt.onnx's MLP: the bias Add of the fc MatMul, then GELU exported as
// Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5, constants as scalar Constant nodes.
void build_gelu_as_in_gpt(Builder& b, DType t) {
  const std::vector<std::string> s = {"N", "T", "128"};
  Value* mm = b.input("matmul_out", t, s);
  Value* bias = b.initializer("fc.bias", random_tensor(t, {128}, 3, 0.5f));
  Value* x = b.node("Add", {bias, mm}, t, s);
  Value* d = b.node("Div", {x, b.constant(1.4142135381698608f, t)}, t, s);
  Value* e = b.node("Erf", {d}, t, s);
  Value* a = b.node("Add", {e, b.constant(1.0f, t)}, t, s);
  Value* m = b.node("Mul", {x, a}, t, s);
  b.g.add_output(b.node("Mul", {m, b.constant(0.5f, t)}, t, s, "gelu"));
}

TEST(ElementwiseFusion, GeluChainFromGptIsOneGroupWithInlinedConstants) {
  Builder b;
  build_gelu_as_in_gpt(b, DType::kFloat);
  ElementwiseFusion pass;
  ASSERT_TRUE(pass.run(b.m));
  EXPECT_EQ(b.g.num_nodes(), 1u) << "the three Constant nodes go once inlined";
  EXPECT_EQ(pass.stats().at("nodes_fused"), 6);
  EXPECT_EQ(pass.stats().at("constants_inlined"), 3);
  const Node* fused = *b.g.nodes().begin();
  EXPECT_EQ(fused->doc_string, "Add+Div+Erf+Add+Mul+Mul");
  EXPECT_EQ(fused->inputs().size(), 2u);
}

TEST(ElementwiseFusion, GeluChainMatchesUnfusedAndExactGelu) {
  for (DType t : kFloatTypes)
    expect_fusion_preserves_results([t](Builder& b) { build_gelu_as_in_gpt(b, t); },
                                    {{"matmul_out", random_tensor(t, {2, 3, 128}, 4)}}, 1);
  // And the fp32 chain is GELU: 0.5 x (1 + erf(x / sqrt 2)) within fp32 rounding.
  Builder b;
  build_gelu_as_in_gpt(b, DType::kFloat);
  ElementwiseFusion().run(b.m);
  const Tensor in = random_tensor(DType::kFloat, {1, 2, 128}, 5);
  const auto out = run_graph(*b.m.graph, {{"matmul_out", in}});
  const Tensor& bias = b.g.value("fc.bias")->initializer();
  for (int64_t i = 0; i < in.numel(); ++i) {
    const double x = in.as<float>()[i] + static_cast<double>(bias.as<float>()[i % 128]);
    if (!std::isfinite(x)) continue;
    const double gelu = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    EXPECT_NEAR(out.at("gelu").v[static_cast<size_t>(i)], gelu, 1e-6 * std::max(1.0, std::fabs(gelu))) << "x=" << x;
  }
}

// The attention mask: scale the scores, then Where(mask, scores, -inf) with a broadcast bool mask.
void build_scaled_masked_scores(Builder& b, DType t) {
  Value* scores = b.input("scores", t, {"N", "4", "T", "T"});
  Value* mask = b.input("mask", DType::kBool, {"1", "1", "T", "T"});
  Value* scaled = b.node("Mul", {scores, b.constant(0.125f, t)}, t, {"N", "4", "T", "T"});
  b.g.add_output(b.node("Where", {mask, scaled, b.constant(-INFINITY, t)}, t, {"N", "4", "T", "T"}, "masked"));
}

TEST(ElementwiseFusion, MaskedScoresWithBoolBroadcastMatchUnfused) {
  for (DType t : kFloatTypes)
    expect_fusion_preserves_results([t](Builder& b) { build_scaled_masked_scores(b, t); },
                                    {{"scores", random_tensor(t, {2, 4, 5, 5}, 6)},
                                     {"mask", random_tensor(DType::kBool, {1, 1, 5, 5}, 7)}},
                                    1);
}

TEST(ElementwiseFusion, ValueReadOutsideTheGroupStaysAnOutputUnderItsName) {
  auto build = [](Builder& b) {
    Value* x = b.input("x", DType::kFloat, {"3", "4"});
    Value* y = b.input("y", DType::kFloat, {"3", "4"});
    Value* w = b.input("w", DType::kFloat, {"4", "2"});
    Value* sum = b.node("Add", {x, y}, DType::kFloat, {"3", "4"}, "sum");
    Value* act = b.node("Tanh", {sum}, DType::kFloat, {"3", "4"}, "act");
    b.g.add_output(act);
    b.g.add_output(b.node("MatMul", {sum, w}, DType::kFloat, {"3", "2"}, "proj"));
  };
  Builder b;
  build(b);
  ASSERT_TRUE(ElementwiseFusion().run(b.m));
  const Node* fused = b.g.value("act")->producer();
  ASSERT_EQ(fused->op_type(), kFusedElementwiseOp);
  ASSERT_EQ(fused->outputs().size(), 2u);
  EXPECT_EQ(fused->output(0)->name(), "sum");
  EXPECT_EQ(fused->output(1)->name(), "act");
  EXPECT_EQ(b.g.value("proj")->producer()->input(0), fused->output(0));
  expect_fusion_preserves_results(build,
                                  {{"x", random_tensor(DType::kFloat, {3, 4}, 8)},
                                   {"y", random_tensor(DType::kFloat, {3, 4}, 9)},
                                   {"w", random_tensor(DType::kFloat, {4, 2}, 10)}},
                                  1);
}

TEST(ElementwiseFusion, NoGroupThroughAnUnfusedNodeThatReadsTheGroup) {
  // a = Relu(x); p = MatMul(a, w); c = Add(a, p); d = Tanh(c). Putting c with a would need p both
  // before and after the fused node, so c and d form their own group.
  auto build = [](Builder& b) {
    Value* x = b.input("x", DType::kFloat, {"2", "2"});
    Value* w = b.input("w", DType::kFloat, {"2", "2"});
    Value* a = b.node("Relu", {x}, DType::kFloat, {"2", "2"}, "a");
    Value* p = b.node("MatMul", {a, w}, DType::kFloat, {"2", "2"}, "p");
    Value* c = b.node("Add", {a, p}, DType::kFloat, {"2", "2"}, "c");
    b.g.add_output(b.node("Tanh", {c}, DType::kFloat, {"2", "2"}, "d"));
  };
  Builder b;
  build(b);
  ASSERT_TRUE(ElementwiseFusion().run(b.m));
  EXPECT_EQ(b.g.value("a")->producer()->op_type(), "Relu");
  const Node* fused = b.g.value("d")->producer();
  EXPECT_EQ(fused->op_type(), kFusedElementwiseOp);
  EXPECT_EQ(fused->doc_string, "Add+Tanh");
  EXPECT_TRUE(b.g.is_topologically_sorted());
  expect_fusion_preserves_results(build,
                                  {{"x", random_tensor(DType::kFloat, {2, 2}, 11)},
                                   {"w", random_tensor(DType::kFloat, {2, 2}, 12)}},
                                  1);
}

TEST(ElementwiseFusion, DifferentIterationShapesDoNotFuse) {
  Builder b;
  Value* x = b.input("x", DType::kFloat, {"1", "8"});
  Value* y = b.input("y", DType::kFloat, {"4", "8"});
  Value* r = b.node("Relu", {x}, DType::kFloat, {"1", "8"});
  b.g.add_output(b.node("Add", {r, y}, DType::kFloat, {"4", "8"}));
  ElementwiseFusion pass;
  EXPECT_FALSE(pass.run(b.m)) << "Relu's [1,8] result is an output of its own; the Add iterates over [4,8]";
  EXPECT_EQ(b.g.num_nodes(), 2u);
}

TEST(ElementwiseFusion, UnaryChainsOnUnknownDimsFuse) {
  Builder b;
  const ValueType partly_known = ValueType::tensor(DType::kFloat, Shape{{Dim{}, Dim::fixed(8)}});
  Value* u = b.g.add_input("u", partly_known);
  Node* e = b.g.add_node("Exp", {u}, {"e"});
  e->output(0)->set_type(partly_known);
  Node* n = b.g.add_node("Neg", {e->output(0)}, {"n"});
  n->output(0)->set_type(partly_known);
  b.g.add_output(n->output(0));
  ElementwiseFusion pass;
  EXPECT_TRUE(pass.run(b.m)) << "an unknown dim is the same dim all along a unary chain";
  EXPECT_EQ(b.g.num_nodes(), 1u);
}

TEST(ElementwiseFusion, IntegerOpsAndInitializerScalarsAreLeftAlone) {
  Builder b;
  Value* i = b.input("i", DType::kInt64, {"4"});
  Value* j = b.node("Add", {i, i}, DType::kInt64, {"4"});
  b.g.add_output(b.node("Mul", {j, i}, DType::kInt64, {"4"}));
  EXPECT_FALSE(ElementwiseFusion().run(b.m));
}

TEST(ElementwiseFusion, SingleNodeGroupsForBackends) {
  Builder b;
  build_add_relu(b, DType::kFloat16);
  const auto groups = find_elementwise_groups(*b.m.graph, 1, [](const Node* n) { return n->op_type() == "Relu"; });
  ASSERT_EQ(groups.size(), 1u) << "the claimed Relu is left out, the Add is a group of one";
  EXPECT_EQ(groups[0].nodes.size(), 1u);
  EXPECT_EQ(groups[0].nodes[0]->op_type(), "Add");
  Node* matmul = b.g.add_node("MatMul", {b.g.value("x"), b.g.value("x")}, 1);
  std::vector<const Value*> inputs;
  EXPECT_THROW(node_program(*matmul, &inputs), InputError);
}

// Values without shapes, as the training passes leave them: the chain still fuses, since each
// result's shape follows from its operands (rank-0 constants change nothing), while an Add of two
// unrelated unknown shapes may broadcast and starts a group of its own.
TEST(ElementwiseFusion, UnknownShapesFuseThroughElementwiseChains) {
  Builder b;
  const ValueType unknown = ValueType::tensor(DType::kFloat);
  Value* x = b.g.add_input("x", unknown);
  Value* y = b.g.add_input("y", unknown);
  auto op = [&](const std::string& type, std::vector<Value*> ins, const std::string& name) {
    Node* n = b.g.add_node(type, ins, {name});
    n->output(0)->set_type(unknown);
    return n->output(0);
  };
  Value* d = op("Div", {x, b.constant(1.4142135f, DType::kFloat)}, "d");
  Value* e = op("Erf", {d}, "e");
  Value* a = op("Add", {e, b.constant(1.0f, DType::kFloat)}, "a");
  Value* m = op("Mul", {x, a}, "m");
  Value* s = op("Add", {m, y}, "s");  // y's shape is unrelated: s may be larger than m
  b.g.add_output(op("Tanh", {s}, "t"));
  const auto groups = find_elementwise_groups(b.g, 1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].nodes.size(), 4u) << "Div, Erf, Add, Mul share x's shape";
  EXPECT_EQ(groups[1].nodes.size(), 2u) << "Add with y, then Tanh of it";
  EXPECT_EQ(groups[0].outputs, std::vector<Value*>{m});
}

TEST(ElementwiseFusion, GroupingRuleOnAnAbstractDag) {
  // 0: fusable A   1: fusable B(0)   2: opaque C(1)   3: fusable D(1, 2)   4: fusable E(3), other shape
  std::vector<FusionCandidate> ops(5);
  ops[0] = {true, std::string("s"), {}};
  ops[1] = {true, std::string("s"), {0}};
  ops[2] = {false, std::string("s"), {1}};
  ops[3] = {true, std::string("s"), {1, 2}};
  ops[4] = {true, std::string("t"), {3}};
  const auto groups = group_fusion_candidates(ops, 1);
  EXPECT_EQ(groups, (std::vector<std::vector<int>>{{0, 1}, {3}, {4}}))
      << "3 cannot join {0,1}: it reads 2, which reads 1";
  EXPECT_EQ(group_fusion_candidates(ops, 2), (std::vector<std::vector<int>>{{0, 1}}));

  // Two independent chains meeting in one op become one group (AdamW's new m and new v).
  std::vector<FusionCandidate> meet(3);
  meet[0] = {true, std::string("s"), {}};
  meet[1] = {true, std::string("s"), {}};
  meet[2] = {true, std::string("s"), {0, 1}};
  EXPECT_EQ(group_fusion_candidates(meet, 1), (std::vector<std::vector<int>>{{0, 1, 2}}));

  // ... unless one reaches the other through an op outside both.
  std::vector<FusionCandidate> through(4);
  through[0] = {true, std::string("s"), {}};
  through[1] = {false, std::string("s"), {0}};
  through[2] = {true, std::string("s"), {1}};
  through[3] = {true, std::string("s"), {0, 2}};
  EXPECT_EQ(group_fusion_candidates(through, 1), (std::vector<std::vector<int>>{{0}, {2, 3}}));

  // A group runs as one kernel, so reaching any member reaches the inputs of all of them: the
  // unscaled gradient (0) feeds AllFinite (1), whose flag a scalar group (2, 3, 4) reads in 3; the
  // update (5) reads that group's 4, which does not depend on the flag, yet 5 cannot join 0.
  std::vector<FusionCandidate> contracted(6);
  contracted[0] = {true, std::string("p"), {}};
  contracted[1] = {false, std::string(), {0}};
  contracted[2] = {true, std::string(""), {}};
  contracted[3] = {true, std::string(""), {1, 2}};
  contracted[4] = {true, std::string(""), {2}};
  contracted[5] = {true, std::string("p"), {0, 4}};
  EXPECT_EQ(group_fusion_candidates(contracted, 1), (std::vector<std::vector<int>>{{0}, {2, 3, 4}, {5}}));
}

TEST(ElementwiseProgram, MergedPartsReadEachOthersOutputsFromRegisters) {
  // part A: v2 = v0 * v1 (fp16); part B: v3 = relu(v2); keep only v3.
  ProgramPart a{ElementwiseProgram::parse("inputs float16 float16\n%0 = Input 0 : float16\n%1 = Input 1 : float16\n"
                                          "%2 = Mul %0 %1 : float16\nreturn %2\n"),
                {0, 1}, {2}};
  ProgramPart r{ElementwiseProgram::parse("inputs float16\n%0 = Input 0 : float16\n%1 = Relu %0 : float16\nreturn %1\n"),
                {2}, {3}};
  const ProgramPart merged = merge_programs({&a, &r}, [](int v) { return v == 3; });
  EXPECT_EQ(merged.inputs, (std::vector<int>{0, 1}));
  EXPECT_EQ(merged.outputs, (std::vector<int>{3}));
  EXPECT_EQ(merged.program.to_text(),
            "inputs float16 float16\nmin_rank 0\n%0 = Input 0 : float16\n%1 = Input 1 : float16\n"
            "%2 = Mul %0 %1 : float16\n%3 = Relu %2 : float16\nreturn %3\n");
}

// ---- the program's text form

TEST(ElementwiseProgram, TextRoundTripsExactly) {
  Builder b;
  build_gelu_as_in_gpt(b, DType::kFloat16);
  const auto groups = find_elementwise_groups(*b.m.graph, 2);
  ASSERT_EQ(groups.size(), 1u);
  const std::string text = groups[0].program.to_text();
  EXPECT_EQ(ElementwiseProgram::parse(text).to_text(), text);
  EXPECT_NE(text.find("= Erf %"), std::string::npos) << text;
  EXPECT_NE(text.find(" : float16"), std::string::npos) << text;
}

TEST(ElementwiseProgram, MalformedTextIsAnInputErrorNamingTheLine) {
  const char* bad[] = {
      "inputs float\n%0 = Input 0 : float\n%1 = Frobnicate %0 : float\nreturn %1\n",  // unknown op
      "inputs float\n%0 = Input 0 : float\n%1 = Add %0 : float\nreturn %1\n",         // arity
      "inputs float\n%0 = Input 0 : float\n%1 = Relu %2 : float\nreturn %1\n",        // forward reference
      "inputs float\n%0 = Input 0 : float\n%1 = Less %0 %0 : float\nreturn %1\n",     // compare must be bool
      "inputs int64\n%0 = Input 0 : int64\nreturn %0\n",                              // type
      "inputs float\n%0 = Input 0 : float\n",                                         // no return
  };
  for (const char* text : bad) {
    try {
      ElementwiseProgram::parse(text);
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("FusedElementwise program"), std::string::npos) << e.what();
    }
  }
}

TEST(ElementwiseProgram, EvaluationRejectsWrongInputs) {
  const auto p = ElementwiseProgram::parse("inputs float float\n%0 = Input 0 : float\n%1 = Input 1 : float\n"
                                           "%2 = Add %0 %1 : float\nreturn %2\n");
  const Tensor a(DType::kFloat, {2, 3}), b(DType::kFloat, {4}), h(DType::kFloat16, {3});
  EXPECT_THROW(evaluate_elementwise_program(p, {&a, &b}, "n"), InputError);
  EXPECT_THROW(evaluate_elementwise_program(p, {&a, &h}, "n"), InputError);
  EXPECT_THROW(evaluate_elementwise_program(p, {&a}, "n"), InputError);
  const Tensor c(DType::kFloat, {1, 1, 3});
  EXPECT_EQ(evaluate_elementwise_program(p, {&a, &c}, "n")[0].dims, (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace amp
