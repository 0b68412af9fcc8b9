// Cast insertion in before/expected form: each test builds a model, rewrites it with colour() and
// insert_casts(), and compares it with the model written out by hand, names included.
#include <gtest/gtest.h>

#include <set>

#include "graph/half.h"
#include "passes/amp/cast_cleanup.h"
#include "passes/amp/insert_casts.h"
#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

using test::ModelBuilder;

CastReport rewrite(Model& m, const AmpPolicy& policy = AmpPolicy()) {
  CastReport r = insert_casts(m, policy, colour(m, policy));
  test::expect_sound(m);
  return r;
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

TEST(AmpInsertCasts, ProductGetsCastsAtTheGraphEdgesAndKeepsWeightsFp32) {
  ModelBuilder before;
  before.output(before.op("MatMul", {before.input("x"), before.weight("w")}, "y"));
  const CastReport r = rewrite(before.m);

  ModelBuilder expected;
  Value* x = expected.input("x");
  Value* w = expected.weight("w");
  Value* x16 = expected.cast(x, DType::kFloat16, "x_fp16");
  Value* w16 = expected.cast(w, DType::kFloat16, "w_fp16");
  Value* y16 = expected.op("MatMul", {x16, w16}, "y_fp16", DType::kFloat16);
  expected.producer("y_fp16")->name = "y_node";
  expected.output(expected.cast(y16, DType::kFloat, "y"));
  EXPECT_EQ(test::graph_diff(before.m, expected.m), "");
  EXPECT_EQ(r.casts_added, 3);
  EXPECT_EQ(r.values_retyped, 1);
}

TEST(AmpInsertCasts, LowPrecisionWeightsAreStoredConverted) {
  ModelBuilder before;
  before.output(before.op("MatMul", {before.input("x"), before.weight("w", {8, 8}, 0.1f)}, "y"));
  AmpPolicy policy;
  policy.weights = WeightStorage::kLowPrecision;
  const CastReport r = rewrite(before.m, policy);
  const Value* w = before.m.graph->value("w");
  ASSERT_TRUE(w->has_initializer());
  EXPECT_EQ(w->dtype(), DType::kFloat16);
  EXPECT_EQ(w->initializer().as<uint16_t>()[0], fp32_to_fp16(0.1f));
  EXPECT_EQ(count_ops(*before.m.graph, "Cast"), 2);  // x in, y out
  EXPECT_EQ(r.constants_converted, 1);
}

TEST(AmpInsertCasts, WithoutKeepIoTypesTheGraphInputsAndOutputsBecomeLow) {
  ModelBuilder before;
  before.output(before.op("MatMul", {before.input("x"), before.weight("w")}, "y"));
  AmpPolicy policy;
  policy.keep_io_types = false;
  policy.weights = WeightStorage::kLowPrecision;
  rewrite(before.m, policy);
  EXPECT_EQ(count_ops(*before.m.graph, "Cast"), 0);
  EXPECT_EQ(before.m.graph->inputs()[0]->dtype(), DType::kFloat16);
  EXPECT_EQ(before.m.graph->outputs()[0]->dtype(), DType::kFloat16);
  EXPECT_EQ(before.m.graph->outputs()[0]->name(), "y");
}

// REFERENCE §2 failure 1: an existing Cast is retargeted, never left producing the wrong type, and
// graph outputs keep their types.
TEST(AmpInsertCasts, ExistingCastFromIntegersIsRetargeted) {
  ModelBuilder before;
  Value* h = before.op("MatMul", {before.input("x"), before.weight("w")}, "h");
  Value* mask = before.cast(before.input("mask", DType::kInt64), DType::kFloat, "mask_f");
  Value* m = before.op("Mul", {h, mask}, "m");
  before.output(before.op("MatMul", {m, before.weight("w2")}, "y"));
  const CastReport r = rewrite(before.m);
  EXPECT_EQ(r.casts_retargeted, 1);
  const Node* cast = before.producer("mask_f");
  EXPECT_EQ(cast->attr_int("to", 0), static_cast<int64_t>(DType::kFloat16));
  EXPECT_EQ(cast->output(0)->dtype(), DType::kFloat16);
  EXPECT_EQ(before.producer("m")->input(1), cast->output(0));
  EXPECT_EQ(before.m.graph->outputs()[0]->dtype(), DType::kFloat);
}

// Failure 2: inputs the schema fixes to float (Resize's scales) stay fp32 even when the op runs low,
// in the main graph and inside a Loop body.
TEST(AmpInsertCasts, InputsFixedToFloatKeepTheirType) {
  ModelBuilder before;
  Value* x = before.input("x", DType::kFloat, {1, 2, 4, 4});
  Value* c = before.op("Conv", {x, before.weight("k", {2, 2, 1, 1})}, "c");
  Value* scales = before.weight_values("scales", {1, 1, 2, 2});
  Value* roi = before.weight_values("roi", {});
  Value* up = before.op("Resize", {c, roi, scales}, "up", DType::kFloat, {}, nullptr, Shape::of({1, 2, 8, 8}));
  before.output(before.op("Conv", {up, before.weight("k2", {2, 2, 1, 1})}, "y"));
  AmpPolicy policy;
  policy.apply({OpListEdits{{{OpCategory::kAllow, {"Resize"}}}, "test"}});
  policy.weights = WeightStorage::kLowPrecision;
  rewrite(before.m, policy);
  const Node* resize = before.producer("up");
  EXPECT_EQ(resize->input(0)->dtype(), DType::kFloat16);
  EXPECT_EQ(resize->input(1)->dtype(), DType::kFloat);  // roi: its own type variable
  EXPECT_EQ(resize->input(2)->dtype(), DType::kFloat);  // scales: tensor(float)
  EXPECT_EQ(resize->input(2), before.m.graph->value("scales"));
  EXPECT_EQ(resize->output(0)->dtype(), DType::kFloat16);
}

TEST(AmpInsertCasts, InputsFixedToFloatKeepTheirTypeInsideALoop) {
  ModelBuilder before;
  Value* x = before.input("x", DType::kFloat, {1, 2, 4, 4});
  Value* scales = before.weight_values("scales", {1, 1, 1, 1});
  Value* trip = before.int64s("trip", {3});
  Node* loop = before.graph().add_node("Loop", {trip, nullptr, x}, {"y"});
  loop->name = "loop";
  loop->output(0)->set_type(x->type());
  Attribute body_attr;
  body_attr.name = "body";
  body_attr.kind = AttrKind::kGraph;
  body_attr.g = std::make_unique<Graph>(&before.graph());
  Graph* body = body_attr.g.get();
  body->name = "body";
  body->add_input("i", ValueType::tensor(DType::kInt64, Shape::of({})));
  Value* cond_in = body->add_input("cond_in", ValueType::tensor(DType::kBool, Shape::of({})));
  Value* carried = body->add_input("carried", x->type());
  Value* conv = before.op("Conv", {carried, before.weight("k", {2, 2, 1, 1})}, "conv", DType::kFloat, {}, body);
  Value* up = before.op("Resize", {conv, nullptr, scales}, "up", DType::kFloat, {}, body);
  Value* cond_out = before.op("Identity", {cond_in}, "cond_out", DType::kBool, {}, body);
  body->add_output(cond_out);
  body->add_output(up);
  loop->set_attr(std::move(body_attr));
  before.output(loop->output(0));
  AmpPolicy policy;
  policy.apply({OpListEdits{{{OpCategory::kAllow, {"Resize"}}}, "test"}});
  rewrite(before.m, policy);
  const Node* resize = body->lookup("up")->producer();
  EXPECT_EQ(resize->input(0)->dtype(), DType::kFloat16);
  EXPECT_EQ(resize->input(2), scales);
  // The loop-carried value keeps one type: fp32 into the body, fp32 out of it.
  EXPECT_EQ(body->inputs()[2]->dtype(), DType::kFloat);
  EXPECT_EQ(body->outputs()[1]->dtype(), DType::kFloat);
  EXPECT_EQ(loop->output(0)->dtype(), DType::kFloat);
}

// Failure 3: with keep_io_types, an output that is also read further on stays sorted and typed.
TEST(AmpInsertCasts, OutputReadByLaterNodesKeepsTheGraphSorted) {
  ModelBuilder before;
  Value* h = before.op("MatMul", {before.input("x"), before.weight("w")}, "h");
  before.output(h);
  Value* r = before.op("Relu", {h}, "r");
  before.output(before.op("MatMul", {r, before.weight("w2")}, "y"));
  rewrite(before.m);
  EXPECT_TRUE(before.m.graph->is_topologically_sorted());
  EXPECT_EQ(before.m.graph->outputs()[0]->name(), "h");
  EXPECT_EQ(before.m.graph->outputs()[0]->dtype(), DType::kFloat);
  EXPECT_EQ(before.producer("r")->input(0)->name(), "h_fp16");  // the low value, no round trip
}

// Failures 4 and 10: casts only at precision boundaries, one per (value, type), none inside low or
// fp32 regions.
TEST(AmpInsertCasts, OneCastPerBoundaryAndNoneInsideRegions) {
  ModelBuilder before;
  Value* h = before.op("MatMul", {before.input("x"), before.weight("w1")}, "h");
  Value* a = before.op("Add", {h, before.weight("b1", {8})}, "a");
  Value* s = before.op("Softmax", {a}, "s");
  Value* e = before.op("Exp", {a}, "e");  // a second fp32 reader of `a` shares its Cast
  Value* p = before.op("Mul", {s, e}, "p");
  before.output(before.op("MatMul", {p, before.weight("w2")}, "y"));
  rewrite(before.m);
  // x, w1, b1, w2 in; a to fp32 (shared by Softmax and Exp); p to fp16; y out.
  EXPECT_EQ(count_ops(*before.m.graph, "Cast"), 7);
  EXPECT_EQ(before.producer("s")->input(0), before.producer("e")->input(0));
  EXPECT_EQ(before.producer("s")->input(0)->name(), "a_fp32");
}

// Failure 6: clamping to ±65504 is done and reported with its count and largest error.
TEST(AmpInsertCasts, ConstantsBeyondFp16RangeAreClampedAndReported) {
  ModelBuilder before;
  Value* h = before.op("MatMul", {before.input("x"), before.weight("w")}, "h");
  Tensor big(DType::kFloat, {4});
  const float values[] = {1e5f, -7e4f, 1e-9f, 2.0f};
  std::copy(values, values + 4, big.mutable_as<float>());
  Value* c = before.op("Constant", {}, "c", DType::kFloat, test::attrs(Attribute::of_tensor("value", big)), nullptr, Shape::of({4}));
  Value* s = before.op("Mul", {h, c}, "s", DType::kFloat, {}, nullptr, Shape::of({2, 8}));
  before.output(before.op("MatMul", {s, before.weight("w2")}, "y"));
  const CastReport r = rewrite(before.m);
  ASSERT_EQ(r.clamps.size(), 1u);
  EXPECT_EQ(r.clamps[0].tensor, "c");
  EXPECT_EQ(r.clamps[0].clamped, 2);
  EXPECT_DOUBLE_EQ(r.clamps[0].max_error, 1e5 - 65504);
  EXPECT_EQ(r.clamps[0].flushed_to_zero, 1);
  const Tensor& stored = before.producer("c")->attr("value")->t;
  ASSERT_EQ(stored.dtype, DType::kFloat16);
  EXPECT_EQ(stored.as<uint16_t>()[0], fp32_to_fp16(65504.0f));
  EXPECT_EQ(stored.as<uint16_t>()[1], fp32_to_fp16(-65504.0f));
  EXPECT_EQ(stored.as<uint16_t>()[3], fp32_to_fp16(2.0f));
}

TEST(AmpInsertCasts, KeptFp32WeightsBeyondTheRangeAreWarnedAbout) {
  ModelBuilder before;
  before.output(before.op("MatMul", {before.input("x"), before.weight("w", {8, 8}, 1e6f)}, "y"));
  const CastReport r = rewrite(before.m);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("'w' has 64 values beyond the fp16 range"), std::string::npos) << r.warnings[0];
}

// Failure 8: bf16 is a target like fp16; ops whose schema has no bf16 stay fp32.
TEST(AmpInsertCasts, Bfloat16Target) {
  ModelBuilder before;
  Value* x = before.input("x", DType::kFloat, {1, 2, 4, 4});
  Value* c = before.op("Conv", {x, before.weight("k", {2, 2, 1, 1})}, "c");
  Value* f = before.op("Flatten", {c}, "f", DType::kFloat, {}, nullptr, Shape::of({1, 32}));
  before.output(before.op("Gemm", {f, before.weight("w", {32, 8}), before.weight("b", {8})}, "y", DType::kFloat, {},
                          nullptr, Shape::of({1, 8})));
  rewrite(before.m, AmpPolicy(DType::kBFloat16));
  EXPECT_EQ(before.producer("c")->output(0)->dtype(), DType::kFloat);
  EXPECT_EQ(before.producer("y_bf16")->output(0)->dtype(), DType::kBFloat16);
  EXPECT_EQ(before.producer("f")->output(0)->dtype(), DType::kBFloat16);
}

// Failure 9: a body reading an outer value gets the Cast in the outer graph, placed before the If
// and visible to the body; the body's outputs keep their types.
TEST(AmpInsertCasts, SubgraphCastsAreVisibleAndBodyOutputsKeepTheirTypes) {
  ModelBuilder before;
  Value* x = before.input("x");
  Value* cond = before.input("cond", DType::kBool, {});
  Node* if_node = before.graph().add_node("If", {cond}, {"y"});
  if_node->name = "if";
  if_node->output(0)->set_type(x->type());
  Graph* then_branch = nullptr;
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>(&before.graph());
    a.g->name = branch;
    Value* out = before.op("MatMul", {x, before.weight(std::string("w_") + branch)}, std::string("o_") + branch,
                           DType::kFloat, {}, a.g.get());
    a.g->add_output(out);
    if (!then_branch) then_branch = a.g.get();
    if_node->set_attr(std::move(a));
  }
  before.output(if_node->output(0));
  rewrite(before.m);
  const Node* matmul = then_branch->lookup("o_then_branch")->producer();
  EXPECT_EQ(matmul->input(0)->name(), "x_fp16");
  EXPECT_EQ(matmul->input(0)->graph(), &before.graph());  // one Cast of x, shared by both branches
  EXPECT_EQ(then_branch->outputs()[0]->dtype(), DType::kFloat);
  EXPECT_EQ(if_node->output(0)->dtype(), DType::kFloat);
}

TEST(AmpInsertCasts, CleanupRemovesExactRoundTripsAndKeepsLossyOnes) {
  ModelBuilder before;
  Value* x = before.input("x");
  Value* h16 = before.cast(x, DType::kFloat16, "h16");     // lossy: kept
  Value* h32 = before.cast(h16, DType::kFloat, "h32");
  Value* again16 = before.cast(h32, DType::kFloat16, "again16");  // exact: reads h16
  Value* same = before.cast(h32, DType::kFloat, "same");    // no-op: reads h32
  Value* dup = before.cast(x, DType::kFloat16, "dup");      // duplicate of h16
  before.output(before.op("Add", {again16, dup}, "sum16", DType::kFloat16));
  before.output(before.op("Relu", {same}, "r"));
  CastCleanupPass cleanup;
  EXPECT_TRUE(cleanup.run(before.m));
  test::expect_sound(before.m);

  ModelBuilder expected;
  Value* ex = expected.input("x");
  Value* e16 = expected.cast(ex, DType::kFloat16, "h16");
  Value* e32 = expected.cast(e16, DType::kFloat, "h32");
  expected.output(expected.op("Add", {e16, e16}, "sum16", DType::kFloat16));
  expected.output(expected.op("Relu", {e32}, "r"));
  EXPECT_EQ(test::graph_diff(before.m, expected.m), "");
  EXPECT_EQ(cleanup.stats().at("exact chains shortened"), 1);
  EXPECT_EQ(cleanup.stats().at("no-op casts removed"), 2);  // `same`, then `again16` (fp16 -> fp16)
  EXPECT_EQ(cleanup.stats().at("duplicate casts merged"), 1);
  EXPECT_FALSE(cleanup.run(before.m));
}

// keras2onnx names a graph output after the node that makes it ("conv1d_1" for Conv node
// "conv1d_1"); the Cast that keeps the output fp32 takes the output's name, and its node must not
// take the node's: ONNX Runtime refuses a model with two nodes of one name.
TEST(AmpInsertCasts, CastNodeNamesStayApartFromNodesOfTheSameName) {
  ModelBuilder before;
  Value* y = before.op("MatMul", {before.input("x"), before.weight("w")}, "y");
  before.producer("y")->name = "y";
  before.output(y);
  rewrite(before.m);
  std::set<std::string> names;
  for (const Node* n : before.m.graph->nodes()) EXPECT_TRUE(names.insert(n->name).second) << "two nodes named " << n->name;
  EXPECT_EQ(before.producer("y")->op_type(), "Cast");
  EXPECT_EQ(before.producer("y")->name, "y_cast");
}

}  // namespace
}  // namespace amp
