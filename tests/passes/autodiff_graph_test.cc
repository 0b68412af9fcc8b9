// Gradient graphs, inspected without running them: the demo models' training graphs (loss +
// gradients of every parameter) pass onnx::checker and ONNX's strict shape inference — which runs
// the inference functions of the ai.onnx_amp schemas — and every gradient's inferred type is its
// parameter's; small before/expected graphs check broadcasting, fan-out sums, Dropout's mask and
// the errors. Numeric checks against finite differences are in gradient_check_test.cc.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <map>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph_builder.h"
#include "passes/training/loss.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::vector<Value*> float_initializers_except_running_stats(const Graph& g) {
  std::vector<Value*> out;
  for (Value* v : g.initializers()) {
    bool stat = false;
    for (const Use& u : v->uses()) stat = stat || (u.node->op_type() == "BatchNormalization" && u.index >= 3);
    if (is_floating(v->dtype()) && !stat) out.push_back(v);
  }
  return out;
}

std::map<std::string, std::string> inferred_output_types(onnx::ModelProto& p) {
  onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/false);
  onnx::shape_inference::InferShapes(p, onnx::OpSchemaRegistry::Instance(), strict);
  std::map<std::string, std::string> types;
  for (const auto& vi : p.graph().output()) types[vi.name()] = vi.type().DebugString();
  for (const auto& vi : p.graph().value_info()) types[vi.name()] = vi.type().DebugString();
  return types;
}

class ModelGradients : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelGradients, EveryParameterGetsACheckedGradientOfItsType) {
  register_amp_op_schemas();
  Model m = load_model(test::source_dir() + "/models/" + GetParam() + ".train.onnx");
  LossInfo loss = add_loss(m, LossSpec{LossKind::kCrossEntropy, "logits", "labels"});
  Graph& g = *m.graph;
  std::vector<Value*> params = float_initializers_except_running_stats(g);
  GraphBuilder b(g);
  std::vector<Value*> grads = build_gradients(g, loss.loss, b.scalar(1, DType::kFloat), params);
  ASSERT_EQ(grads.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_NE(grads[i], nullptr) << params[i]->name();
    EXPECT_EQ(grads[i]->name(), params[i]->name() + "_grad");
    EXPECT_EQ(grads[i]->type(), params[i]->type()) << params[i]->name();
    g.add_output(grads[i]);
  }
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  EXPECT_EQ(verify(m), std::vector<std::string>{});

  onnx::ModelProto p = to_proto(m);
  // Inference derives every intermediate type again; the declared output types must agree with it.
  p.mutable_graph()->clear_value_info();
  EXPECT_NO_THROW(onnx::checker::check_model(p));
  auto types = inferred_output_types(p);
  onnx::ModelProto original = to_proto(m);
  for (const auto& vi : original.graph().initializer()) {
    if (!types.count(vi.name() + "_grad")) continue;
    onnx::TypeProto expect;
    expect.mutable_tensor_type()->set_elem_type(vi.data_type());
    for (int64_t d : vi.dims()) expect.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    EXPECT_EQ(types[vi.name() + "_grad"], expect.DebugString()) << vi.name();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradients, ::testing::Values("mlp", "cnn", "gpt"));

// ---- small graphs

struct Small {
  Model m;
  Graph& g = *m.graph;
  GraphBuilder b{g};
  Small() { m.opset_imports = {{"", 17}}; }
  Value* input(const std::string& name, DType t, Shape s) { return g.add_input(name, ValueType::tensor(t, s)); }
  Value* weight(const std::string& name, std::vector<int64_t> dims) {
    Tensor t(DType::kFloat, dims);
    t.name = name;
    return g.add_initializer(std::move(t));
  }
  Value* typed(Value* v, Shape s) {
    v->set_type(ValueType::tensor(v->dtype(), s));
    return v;
  }
  Value* total(Value* x) { return typed(b.reduce_sum(x, {}, false), Shape::of({})); }
  std::vector<Value*> grads(Value* loss, std::vector<Value*> wrt) {
    return build_gradients(g, loss, b.scalar(1, DType::kFloat), wrt);
  }
};

Shape batch_by(int64_t c) { return Shape{{Dim::symbol("N"), Dim::fixed(c)}}; }

TEST(Autodiff, BiasGradientSumsOverTheBroadcastBatchAxis) {
  Small s;
  Value* x = s.input("x", DType::kFloat, batch_by(3));
  Value* bias = s.weight("bias", {3});
  Value* y = s.typed(s.b.add(x, bias), batch_by(3));
  auto g = s.grads(s.total(y), {bias});
  ASSERT_NE(g[0], nullptr);
  const Node* reduce = g[0]->producer();
  ASSERT_EQ(reduce->op_type(), "ReduceSum");
  EXPECT_EQ(reduce->attr_int("keepdims", 1), 0);
  EXPECT_EQ(constant_ints(reduce->input(1)), std::vector<int64_t>{0});
  EXPECT_EQ(g[0]->type(), bias->type());
}

TEST(Autodiff, KeepdimsReductionForSizeOneAxes) {
  Small s;
  Value* x = s.input("x", DType::kFloat, batch_by(3));
  Value* w = s.weight("w", {1, 3});
  Value* y = s.typed(s.b.mul(x, w), batch_by(3));
  auto g = s.grads(s.total(y), {w});
  const Node* reduce = g[0]->producer();
  ASSERT_EQ(reduce->op_type(), "ReduceSum");
  EXPECT_EQ(reduce->attr_int("keepdims", 0), 1);
  EXPECT_EQ(constant_ints(reduce->input(1)), std::vector<int64_t>{0});
}

TEST(Autodiff, ValueReadTwiceSumsBothContributions) {
  Small s;
  Value* w = s.weight("w", {3});
  Value* sq = s.typed(s.b.mul(w, w), Shape::of({3}));
  auto g = s.grads(s.total(sq), {w});
  const Node* sum = g[0]->producer();
  ASSERT_EQ(sum->op_type(), "Add");
  EXPECT_EQ(sum->input(0)->producer()->op_type(), "Mul");
  EXPECT_EQ(sum->input(1)->producer()->op_type(), "Mul");
}

TEST(Autodiff, ParameterOffThePathGetsNoGradient) {
  Small s;
  Value* w = s.weight("w", {3});
  Value* unused = s.weight("unused", {3});
  auto g = s.grads(s.total(s.typed(s.b.neg(w), Shape::of({3}))), {w, unused});
  EXPECT_NE(g[0], nullptr);
  EXPECT_EQ(g[1], nullptr);
}

TEST(Autodiff, GradientsStopAtShapeComputations) {
  Small s;
  Value* w = s.weight("w", {2, 3});
  Value* flat = s.typed(s.b.reshape(w, s.b.shape_of(s.b.neg(w))), Shape::of({2, 3}));
  auto g = s.grads(s.total(flat), {w});
  EXPECT_NE(g[0], nullptr);  // through Reshape's data input; the Shape branch adds nothing
}

TEST(Autodiff, TrainingDropoutGetsItsMaskOutput) {
  Small s;
  Value* w = s.weight("w", {4});
  Node* d = s.g.add_node("Dropout", {w, s.b.scalar(0.5, DType::kFloat), s.b.scalar(1, DType::kBool)}, 1);
  d->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({4})));
  auto g = s.grads(s.total(d->output(0)), {w});
  ASSERT_EQ(d->outputs().size(), 2u);
  EXPECT_EQ(d->output(1)->dtype(), DType::kBool);
  EXPECT_NE(g[0], nullptr);
}

TEST(Autodiff, OpWithoutRuleIsAnInputErrorNamingNodeAndOp) {
  Small s;
  Value* w = s.weight("w", {3});
  Node* n = s.g.add_node("LpNormalization", {w}, 1);
  n->name = "unit";
  s.typed(n->output(0), Shape::of({3}));
  n->output(0)->set_dtype(DType::kFloat);
  try {
    s.grads(s.total(n->output(0)), {w});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unit (LpNormalization)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no gradient rule"), std::string::npos) << e.what();
  }
}

TEST(Autodiff, BroadcastOnlyKnownAtRunTimeSumsToTheRunTimeShape) {
  Small s;
  Value* x = s.input("x", DType::kFloat, Shape{{Dim::symbol("A")}});
  Value* w = s.input("w", DType::kFloat, Shape{{Dim::symbol("B")}});  // A or B may be 1
  Value* y = s.typed(s.b.add(w, x), Shape{{Dim::symbol("C")}});
  auto g = s.grads(s.total(y), {w, x});
  for (Value* v : g) {
    ASSERT_EQ(v->producer()->op_type(), "SumToShape");
    EXPECT_EQ(v->producer()->domain(), kAmpDomain);
    EXPECT_EQ(v->producer()->input(1)->producer()->op_type(), "Shape");
  }
}

// ---- loss

TEST(Loss, CrossEntropyLabelsDropTheClassAxis) {
  Small s;
  Value* logits = s.input("x", DType::kFloat, Shape{{Dim::symbol("N"), Dim::symbol("T"), Dim::fixed(7)}});
  s.g.add_output(logits);
  LossInfo info = add_loss(s.m, LossSpec{LossKind::kCrossEntropy, "", "y"});
  EXPECT_EQ(info.labels->type().str(), "int64[N,T]");
  EXPECT_EQ(info.loss->type().str(), "float[]");
  EXPECT_TRUE(info.classification);
  EXPECT_EQ(s.g.outputs().back(), info.loss);
}

TEST(Loss, ModelsOwnScalarOutputIsTheLoss) {
  Small s;
  Value* w = s.weight("w", {3});
  Value* l = s.total(w);
  s.g.add_output(l);
  EXPECT_EQ(add_loss(s.m, LossSpec{}).loss, l);
}

TEST(Loss, ErrorsNameTheOutputs) {
  Small s;
  Value* w = s.weight("w", {3});
  s.g.add_output(s.typed(s.b.neg(w), Shape::of({3})));
  s.g.add_output(s.typed(s.b.exp(w), Shape::of({3})));
  EXPECT_THROW(add_loss(s.m, LossSpec{LossKind::kMse, "", "y"}), InputError);      // which output?
  EXPECT_THROW(add_loss(s.m, LossSpec{std::nullopt, s.g.outputs()[0]->name(), "y"}), InputError);  // not scalar
  EXPECT_THROW(add_loss(s.m, LossSpec{LossKind::kMse, "nope", "y"}), InputError);
}

}  // namespace
}  // namespace amp
