// flatten-linear (passes/amp/flatten_linear.h): a batched linear layer whose input comes from an
// fp32 op while its product runs low is rewritten on 2-D rows, so that the rewrite's Cast sits
// between an fp32 Flatten and the product; near misses stay as they were; a second rewrite changes
// nothing. The values are checked against ONNX Runtime and amp-run in tests/python/test_float16.py.
#include <gtest/gtest.h>

#include "graph/onnx_io.h"
#include "passes/pipelines.h"
#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

// x -> Softmax (fp32) -> MatMul(w [8, 6]) -> Add(bias) -> Relu, x of the given type. Built, then
// written and read back, so that every value carries the type the import infers, as in a user's
// model.
test::ModelBuilder linear_after_norm(ValueType x_type, std::vector<int64_t> bias_shape = {6}) {
  test::ModelBuilder b;
  b.m.graph->name = "linear";
  Value* x = b.m.graph->add_input("x", std::move(x_type));
  Value* ln = b.op("Softmax", {x}, "ln");
  std::optional<Shape> out;
  if (ln->type().shape) {
    out = ln->type().shape;
    out->dims.back() = Dim::fixed(6);
  }
  Value* mm = b.op("MatMul", {ln, b.weight("w", {8, 6})}, "mm", DType::kFloat, {}, nullptr, out);
  Value* a = b.op("Add", {mm, b.weight("bias", bias_shape)}, "a");
  b.output(b.op("Relu", {a}, "y"));
  b.m = load_model_from_bytes(serialize_model(b.m), "linear.onnx", ".");
  return b;
}

AmpPolicy compute_policy(DType target = DType::kFloat16) {
  AmpPolicy policy(target);
  policy.cast_placement = CastPlacement::kCompute;
  return policy;
}

// Runs the rewrite; returns the flatten-linear pass's count.
int64_t rewrite(Model& m, const AmpPolicy& policy) {
  AmpResult result;
  PassManager pm = amp_rewrite_pipeline(policy, result, /*verify_each=*/true);
  pm.run(m);
  test::expect_sound(m);
  for (const PassRun& r : pm.runs())
    if (r.name == "flatten-linear") {
      auto it = r.stats.find("linear layers flattened");
      return it == r.stats.end() ? 0 : it->second;
    }
  return 0;
}

void expect_second_rewrite_changes_nothing(Model& m, const AmpPolicy& policy) {
  // Through a file's bytes, as a user rewrites a rewritten model: the types of the values the pass
  // made are those the import infers.
  const std::string bytes = serialize_model(m);
  Model again = load_model_from_bytes(bytes, "rewritten.onnx", ".");
  EXPECT_EQ(rewrite(again, policy), 0);
  EXPECT_EQ(serialize_model(again), bytes);
}

TEST(FlattenLinear, StaticShapesFlattenBeforeTheCastAndRestoreTheShapeFromAnInitializer) {
  for (DType target : {DType::kFloat16, DType::kBFloat16}) {
    test::ModelBuilder b = linear_after_norm(ValueType::tensor(DType::kFloat, Shape::of({2, 4, 8})));
    const AmpPolicy policy = compute_policy(target);
    EXPECT_EQ(rewrite(b.m, policy), 1);
    Node* mm = b.producer("mm");
    ASSERT_TRUE(mm);
    // MatMul <- Cast <- Flatten(axis -1, fp32) <- LayerNormalization
    Node* cast = mm->input(0)->producer();
    ASSERT_EQ(cast->op_type(), "Cast");
    EXPECT_EQ(mm->input(0)->dtype(), target);
    Node* flat = cast->input(0)->producer();
    ASSERT_EQ(flat->op_type(), "Flatten");
    EXPECT_EQ(flat->attr_int("axis", 0), -1);
    EXPECT_EQ(flat->output(0)->dtype(), DType::kFloat);
    EXPECT_EQ(flat->input(0)->name(), "ln");
    EXPECT_EQ(mm->output(0)->type().shape->str(), "[8,6]");
    // The Add's result keeps its name on the Reshape back to [2, 4, 6].
    Node* back = b.producer("a");
    ASSERT_EQ(back->op_type(), "Reshape");
    EXPECT_EQ(back->input(0)->producer()->op_type(), "Add");
    ASSERT_TRUE(back->input(1)->has_initializer());
    const Tensor& dims = back->input(1)->initializer();
    EXPECT_EQ(std::vector<int64_t>(dims.as<int64_t>(), dims.as<int64_t>() + dims.numel()),
              (std::vector<int64_t>{2, 4, 6}));
    EXPECT_EQ(b.m.graph->lookup("a")->type().shape->str(), "[2,4,6]");
    expect_second_rewrite_changes_nothing(b.m, policy);
  }
}

TEST(FlattenLinear, SymbolicLeadingDimsComeFromTheInputsShape) {
  const Shape nsd{{Dim::symbol("N"), Dim::symbol("S"), Dim::fixed(8)}};
  test::ModelBuilder b = linear_after_norm(ValueType::tensor(DType::kFloat, nsd), {1, 6});
  const AmpPolicy policy = compute_policy();
  EXPECT_EQ(rewrite(b.m, policy), 1);
  Node* back = b.producer("a");
  ASSERT_EQ(back->op_type(), "Reshape");
  Node* cat = back->input(1)->producer();
  ASSERT_EQ(cat->op_type(), "Concat");
  Node* lead = cat->input(0)->producer();
  ASSERT_EQ(lead->op_type(), "Shape");
  EXPECT_EQ(lead->attr_int("end", 0), -1);
  EXPECT_EQ(lead->input(0)->name(), "ln");
  ASSERT_TRUE(cat->input(1)->has_initializer());
  EXPECT_EQ(cat->input(1)->initializer().as<int64_t>()[0], 6);
  ASSERT_TRUE(b.m.graph->lookup("a")->type().shape);
  EXPECT_EQ(b.m.graph->lookup("a")->type().shape->str(), "[N,S,6]");
  expect_second_rewrite_changes_nothing(b.m, policy);
}

TEST(FlattenLinear, NearMissesStayAsTheyWere) {
  const ValueType x3 = ValueType::tensor(DType::kFloat, Shape::of({2, 4, 8}));
  {  // consumer placement: no Cast question to answer
    test::ModelBuilder b = linear_after_norm(x3);
    AmpPolicy policy(DType::kFloat16);
    policy.cast_placement = CastPlacement::kConsumer;
    EXPECT_EQ(rewrite(b.m, policy), 0);
  }
  {  // a 2-D input: ONNX Runtime's Gemm needs no Reshape
    test::ModelBuilder b = linear_after_norm(ValueType::tensor(DType::kFloat, Shape::of({4, 8})));
    EXPECT_EQ(rewrite(b.m, compute_policy()), 0);
  }
  {  // a bias that is not one row
    test::ModelBuilder b = linear_after_norm(x3, {4, 6});
    EXPECT_EQ(rewrite(b.m, compute_policy()), 0);
  }
  {  // no bias Add after the product
    test::ModelBuilder b;
    Value* x = b.input("x", DType::kFloat, {2, 4, 8});
    Value* ln = b.op("LayerNormalization", {x, b.weight("g", {8}), b.weight("beta", {8})}, "ln");
    b.output(b.op("Relu", {b.op("MatMul", {ln, b.weight("w", {8, 8})}, "mm")}, "y"));
    EXPECT_EQ(rewrite(b.m, compute_policy()), 0);
  }
  {  // the input is a low product's: no Cast lands there; and a product read twice
    test::ModelBuilder b;
    Value* x = b.input("x", DType::kFloat, {2, 4, 8});
    Value* h = b.op("MatMul", {x, b.weight("w0")}, "h");
    Value* mm = b.op("MatMul", {h, b.weight("w1")}, "mm");
    b.output(b.op("Relu", {b.op("Add", {mm, b.weight("bias", {8})}, "a")}, "y"));
    Value* ln = b.op("LayerNormalization", {x, b.weight("g", {8}), b.weight("beta", {8})}, "ln");
    Value* mm2 = b.op("MatMul", {ln, b.weight("w2")}, "mm2");
    b.output(b.op("Add", {b.op("Add", {mm2, b.weight("bias2", {8})}, "a2"), mm2}, "y2"));
    EXPECT_EQ(rewrite(b.m, compute_policy()), 0);
    for (const Node* n : b.m.graph->nodes()) EXPECT_NE(n->op_type(), "Flatten");
  }
}

}  // namespace
}  // namespace amp
