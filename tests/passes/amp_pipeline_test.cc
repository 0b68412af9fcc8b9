// The amp-rewrite pipeline as a whole on a hand-built model with a subgraph, constants, an existing
// Cast and a graph output read further on: the result verifies, and running the pipeline on its own
// output changes nothing (REFERENCE §2 failure 7: converting twice must not add nodes).
#include <gtest/gtest.h>

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

TEST(AmpPipeline, EveryNodeCarriesItsDecisionRecord) {
  test::ModelBuilder b = mixed_model();
  AmpResult result;
  amp_rewrite_pipeline(AmpPolicy(), result, true).run(b.m);
  for (const Node* n : b.m.graph->nodes()) {
    const auto record = read_decision_record(*n);
    ASSERT_TRUE(record) << n->label();
    if (n->op_type() == "Cast") EXPECT_EQ(record->rule, "cast");
  }
  EXPECT_EQ(read_decision_record(*b.producer("h_fp16"))->precision, "fp16");
  EXPECT_EQ(read_decision_record(*b.producer("s"))->rule, "deny-list");
  EXPECT_EQ(*b.m.metadata(kRewriteSettingsKey), "dtype=fp16 keep_io_types=true weights=keep");
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
