// The amp-rewrite pipeline as a whole on a hand-built model with a subgraph, constants, an existing
// Cast and a graph output read further on: the result verifies, and running the pipeline on its own
// output changes nothing (REFERENCE §2 failure 7: converting twice must not add nodes).
#include <gtest/gtest.h>

#include <functional>

#include "passes/amp/decision_record.h"
#include "passes/pipelines.h"
#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

test::ModelBuilder mixed_model() {
  test::ModelBuilder b;
  Value* x = b.input("x");
  Value* h = b.op("MatMul", {x, b.weight("w")}, "h");
  b.output(h);
  Value* mask = b.cast(b.input("mask", DType::kInt64), DType::kFloat, "mask_f");
  Value* same = b.cast(h, DType::kFloat, "same");  // a no-op Cast, as exports have
  Value* m = b.op("Mul", {same, mask}, "m");
  Value* s = b.op("Softmax", {m}, "s");
  Value* cond = b.input("cond", DType::kBool, {});
  Node* if_node = b.graph().add_node("If", {cond}, {"y"});
  if_node->name = "if";
  if_node->output(0)->set_type(x->type());
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>(&b.graph());
    a.g->name = branch;
    a.g->add_output(b.op("MatMul", {s, b.weight(std::string("w_") + branch)}, std::string("o_") + branch, DType::kFloat,
                         {}, a.g.get()));
    if_node->set_attr(std::move(a));
  }
  b.output(if_node->output(0));
  return b;
}

TEST(AmpPipeline, RewritingTheRewriteChangesNothing) {
  for (DType target : {DType::kFloat16, DType::kBFloat16})
    for (WeightStorage weights : {WeightStorage::kKeep, WeightStorage::kLowPrecision}) {
      test::ModelBuilder b = mixed_model();
      AmpPolicy policy(target);
      policy.weights = weights;
      AmpResult first;
      PassManager once = amp_rewrite_pipeline(policy, first, /*verify_each=*/true);
      EXPECT_TRUE(once.run(b.m));
      test::expect_sound(b.m);
      const std::string bytes = serialize_model(b.m);
      const size_t nodes = b.m.graph->num_nodes();

      AmpResult second;
      PassManager again = amp_rewrite_pipeline(policy, second, /*verify_each=*/true);
      EXPECT_FALSE(again.run(b.m));
      for (const PassRun& r : again.runs()) EXPECT_FALSE(r.changed) << r.name;
      EXPECT_EQ(b.m.graph->num_nodes(), nodes);
      EXPECT_EQ(serialize_model(b.m), bytes);
    }
}

// Rewrites b's model once with `policy`, checked; returns the lookup of the precision and rule each
// node named "<name>_node" got ("fp16 inputs-low"), read from `result`.
std::function<std::string(const char*)> rewrite_once(test::ModelBuilder& b, const AmpPolicy& policy, AmpResult& result) {
  PassManager once = amp_rewrite_pipeline(policy, result, /*verify_each=*/true);
  EXPECT_TRUE(once.run(b.m));
  test::expect_sound(b.m);
  const DType target = policy.target();
  return [&result, target](const char* node) {
    const NodeDecision* nd = result.decisions.find(std::string(node) + "_node");
    return nd ? precision_name(nd->decision.precision, target) + " " + rule_name(nd->decision.rule) : std::string("(none)");
  };
}

// CastPlacement::kCompute (amp-rewrite's default) on each edge it moves (colouring step 6): a
// LayerNorm between Transposes, a Transpose that step 5 made low before an add that step 5 made
// fp32 (backward), a Transpose that step 4 made low after such an add (forward),
// and one that a Relu's step-5 decision read, which stays low. The Casts then sit beside the
// ops that compute, and rewriting the rewrite changes nothing.
TEST(AmpPipeline, CastsBesideComputeOpsAndRewritingAgainChangesNothing) {
  for (DType target : {DType::kFloat16, DType::kBFloat16}) {
    test::ModelBuilder b;
    const auto perm = [] { return test::attrs(Attribute::of_ints("perm", {1, 0})); };
    Value* x = b.input("x", DType::kFloat, {8, 8});
    Value* x2 = b.input("x2", DType::kFloat, {8, 8});
    Value* t0 = b.op("Transpose", {b.op("MatMul", {x, b.weight("w0")}, "h0")}, "t0", DType::kFloat, perm());
    Value* ln = b.op("LayerNormalization", {t0, b.weight("g", {8}), b.weight("beta", {8})}, "ln");
    Value* t1 = b.op("Transpose", {ln}, "t1", DType::kFloat, perm());
    Value* a = b.op("Add", {b.op("MatMul", {t1, b.weight("w1")}, "h1"), b.weight("bias", {8})}, "a");
    Value* t2 = b.op("Transpose", {a}, "t2", DType::kFloat, perm());
    b.output(b.op("Add", {t2, x}, "r"));  // fp32: x is
    Value* t3 = b.op("Transpose", {b.op("Add", {x, x2}, "s")}, "t3", DType::kFloat, perm());
    b.output(b.op("MatMul", {t3, b.weight("w2")}, "h2"));
    Value* t4 = b.op("Transpose", {b.op("Sub", {x, x2}, "d")}, "t4", DType::kFloat, perm());
    Value* h3 = b.op("MatMul", {t4, b.weight("w3")}, "h3");
    Value* h4 = b.op("MatMul", {b.op("Relu", {t4}, "relu"), b.weight("w4")}, "h4");
    b.output(b.op("Add", {h3, h4}, "y"));

    AmpPolicy policy(target);
    policy.cast_placement = CastPlacement::kCompute;
    AmpResult first;
    const auto rule = rewrite_once(b, policy, first);
    const std::string low = target == DType::kFloat16 ? "fp16 " : "bf16 ";
    EXPECT_EQ(rule("t0"), "fp32 next-to-fp32");
    EXPECT_EQ(rule("t1"), "fp32 input-fp32");
    EXPECT_EQ(rule("a"), low + "inputs-low");
    EXPECT_EQ(rule("t2"), "fp32 next-to-fp32");
    EXPECT_EQ(rule("r"), "fp32 input-fp32");
    EXPECT_EQ(rule("s"), "fp32 input-fp32");
    EXPECT_EQ(rule("t3"), "fp32 input-fp32");
    EXPECT_EQ(rule("t4"), low + "next-to-low");
    EXPECT_EQ(rule("relu"), low + "inputs-low");
    // The Transposes that moved carry fp32 in the file: their Casts sit on the products' side.
    for (const Node* n : b.m.graph->nodes()) {
      if (n->op_type() != "Transpose") continue;
      EXPECT_EQ(n->output(0)->dtype(), n->name == "t4_node" ? target : DType::kFloat) << n->name;
    }
    const std::string bytes = serialize_model(b.m);
    AmpResult second;
    PassManager again = amp_rewrite_pipeline(policy, second, /*verify_each=*/true);
    EXPECT_FALSE(again.run(b.m));
    for (const PassRun& r : again.runs()) EXPECT_FALSE(r.changed) << r.name;
    EXPECT_EQ(serialize_model(b.m), bytes);
  }
}

// Step 6's second part: data movement of low-precision values that an fp32 op reads beside a low
// one (a patch embedding's Reshape and Transpose, read by a LayerNorm and by the residual Add) runs
// fp32, from the fp32 end back to the product that computed the values: the Cast to fp32 sits beside
// the product, the Cast back beside the Add, which stays low. Under consumer placement, and where the
// values come from an fp32 op, nothing moves. Rewriting the rewrite changes nothing.
TEST(AmpPipeline, LowValuesAnFp32OpReadsMoveInFp32) {
  for (CastPlacement placement : {CastPlacement::kCompute, CastPlacement::kConsumer}) {
    test::ModelBuilder b;
    const auto perm = [] { return test::attrs(Attribute::of_ints("perm", {1, 0})); };
    Value* x = b.input("x", DType::kFloat, {8, 8});
    Value* h = b.op("MatMul", {x, b.weight("w0")}, "h");
    Value* r = b.op("Reshape", {h, b.int64s("shape", {8, 8})}, "r");
    Value* t = b.op("Transpose", {r}, "t", DType::kFloat, perm());
    b.output(b.op("LayerNormalization", {t, b.weight("g", {8}), b.weight("beta", {8})}, "ln"));
    b.output(b.op("Add", {t, b.op("MatMul", {x, b.weight("w1")}, "h1")}, "res"));
    Value* t2 = b.op("Transpose", {x}, "t2", DType::kFloat, perm());  // fp32 values: step 6's first part
    b.output(b.op("LayerNormalization", {t2, b.weight("g2", {8}), b.weight("beta2", {8})}, "ln2"));
    b.output(b.op("Add", {t2, b.op("MatMul", {x, b.weight("w2")}, "h2")}, "res2"));

    AmpPolicy policy(DType::kFloat16);
    policy.cast_placement = placement;
    AmpResult first;
    const auto rule = rewrite_once(b, policy, first);
    const bool compute = placement == CastPlacement::kCompute;
    EXPECT_EQ(rule("r"), compute ? "fp32 next-to-fp32" : "fp16 next-to-low");
    EXPECT_EQ(rule("t"), compute ? "fp32 next-to-fp32" : "fp16 next-to-low");
    EXPECT_EQ(rule("res"), "fp16 inputs-low");
    EXPECT_EQ(rule("t2"), "fp32 input-fp32");
    EXPECT_EQ(rule("res2"), "fp32 input-fp32");
    if (compute) {
      // h -> Cast fp32 -> r -> t -> {ln, Cast fp16 -> res}
      Node* cast = b.producer("r")->input(0)->producer();
      ASSERT_EQ(cast->op_type(), "Cast");
      EXPECT_EQ(cast->input(0)->name(), "h");
      EXPECT_EQ(b.producer("ln")->input(0)->name(), "t");
      Node* res = b.producer("res")->input(0)->producer();  // the output's Cast back to fp32 <- res
      ASSERT_EQ(res->op_type(), "Add");
      Node* back = res->input(0)->producer();
      ASSERT_EQ(back->op_type(), "Cast");
      EXPECT_EQ(back->input(0)->name(), "t");
      EXPECT_EQ(b.m.graph->lookup("t")->dtype(), DType::kFloat);
    }
    const std::string bytes = serialize_model(b.m);
    AmpResult second;
    PassManager again = amp_rewrite_pipeline(policy, second, /*verify_each=*/true);
    EXPECT_FALSE(again.run(b.m));
    EXPECT_EQ(serialize_model(b.m), bytes);
  }
}

TEST(AmpPipeline, EveryNodeCarriesItsDecisionRecord) {
  test::ModelBuilder b = mixed_model();
  AmpResult result;
  amp_rewrite_pipeline(AmpPolicy(), result, true).run(b.m);
  for (const Node* n : b.m.graph->nodes()) {
    const auto record = read_decision_record(*n);
    ASSERT_TRUE(record) << n->label();
    if (n->op_type() == "Cast") {
      EXPECT_EQ(record->rule, "cast");
    }
  }
  EXPECT_EQ(read_decision_record(*b.producer("h_fp16"))->precision, "fp16");
  EXPECT_EQ(read_decision_record(*b.producer("s"))->rule, "deny-list");
  EXPECT_EQ(*b.m.metadata(kRewriteSettingsKey), "dtype=fp16 keep_io_types=true weights=keep cast_placement=consumer");
  // The no-op Cast was removed before colouring; the Mul reads the low product through one Cast.
  EXPECT_EQ(b.m.graph->lookup("same"), nullptr);
}

// A node calibration keeps is decided fp32 with the rule "calibration" before the op lists are read,
// carries its measurements into the record and --explain, and paints nothing around it: the
// producer of its input stays low.
TEST(AmpPipeline, CalibrationKeepsANodeInFp32WithItsMeasurements) {
  test::ModelBuilder b;
  Value* x = b.input("x");
  Value* h = b.op("MatMul", {x, b.weight("w1")}, "h");
  Value* y = b.op("MatMul", {h, b.weight("w2")}, "y");
  b.output(y);
  b.producer("y")->name = "second";
  b.producer("h")->name = "first";
  AmpPolicy policy;
  policy.keep_calibrated("second", {"kept fp32 by calibration: overflows", {{"overflow", "3"}, {"own_error", "inf"}}});
  AmpResult result;
  amp_rewrite_pipeline(policy, result, /*verify_each=*/true).run(b.m);
  test::expect_sound(b.m);
  const NodeDecision* second = result.decisions.find("second");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->decision.precision, Precision::kFp32);
  EXPECT_EQ(second->decision.rule, Rule::kCalibration);
  EXPECT_EQ(result.decisions.find("first")->decision.precision, Precision::kLow);
  const auto record = read_decision_record(*b.producer("y"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->rule, "calibration");
  EXPECT_EQ(record->reason, "kept fp32 by calibration: overflows");
  using Fields = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(record->fields, (Fields{{"overflow", "3"}, {"own_error", "inf"}}));
  EXPECT_EQ(explain(result.decisions, *second),
            (std::vector<std::string>{"second (MatMul): fp32, calibration: kept fp32 by calibration: overflows",
                                      "  measured: overflow=3, own_error=inf"}));
}

}  // namespace
}  // namespace amp
