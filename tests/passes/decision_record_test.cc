#include "passes/amp/decision_record.h"

#include <gtest/gtest.h>

#include "graph/graph.h"

namespace amp {
namespace {

TEST(DecisionRecord, WritesOneLineAndReadsItBack) {
  Graph g;
  Node* n = g.add_node("MatMul", {}, 1);
  write_decision_record(*n, {"fp16", "allow-list", "MatMul is on the allow list: tensor cores: fp32 accumulation", {}});
  EXPECT_EQ(n->doc_string, "amp: fp16 allow-list: MatMul is on the allow list: tensor cores: fp32 accumulation");
  const auto r = read_decision_record(*n);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->precision, "fp16");
  EXPECT_EQ(r->rule, "allow-list");
  EXPECT_EQ(r->reason, "MatMul is on the allow list: tensor cores: fp32 accumulation");
}

TEST(DecisionRecord, KeepsOtherDocLinesAndReplacesAnOldRecord) {
  Graph g;
  Node* n = g.add_node("Relu", {}, 1);
  n->doc_string = "exported from torch\nsecond line";
  write_decision_record(*n, {"fp32", "input-fp32", "input 'x' is fp32", {}});
  write_decision_record(*n, {"fp16", "inputs-low", "all its inputs are\nlow precision", {}});
  EXPECT_EQ(n->doc_string, "exported from torch\nsecond line\namp: fp16 inputs-low: all its inputs are low precision");
  EXPECT_EQ(read_decision_record(*n)->rule, "inputs-low");
}

// A calibration's measurements are fields of the record (after `from`, in order), and a decision
// read back from the model gets them again, for --explain and the --html panel.
TEST(DecisionRecord, MeasurementsAreFieldsAndReadBackIntoTheDecision) {
  Graph g;
  Node* n = g.add_node("MatMul", {}, 1);
  n->name = "mm";
  Decision d;
  d.precision = Precision::kFp32;
  d.rule = Rule::kCalibration;
  d.reason = "kept";
  d.measurements = {{"own_error", "inf"}, {"overflow", "12"}};
  write_decision_record(*n, make_decision_record(d, DType::kFloat16));
  EXPECT_EQ(n->doc_string, "amp: fp32 calibration: kept\namp.own_error: inf\namp.overflow: 12");
  const AmpDecisions recorded = recorded_decisions(g);
  const NodeDecision* nd = recorded.find(n);
  ASSERT_TRUE(nd);
  EXPECT_EQ(nd->decision.measurements, d.measurements);
  // Writing again without measurements drops the old ones.
  write_decision_record(*n, {"fp16", "allow-list", "MatMul is on the allow list", {}});
  EXPECT_EQ(n->doc_string, "amp: fp16 allow-list: MatMul is on the allow list");
}

TEST(DecisionRecord, NodesWithoutARecordHaveNone) {
  Graph g;
  Node* n = g.add_node("Relu", {}, 1);
  EXPECT_FALSE(read_decision_record(*n));
  n->doc_string = "amp: malformed";
  EXPECT_FALSE(read_decision_record(*n));
}

TEST(DecisionRecord, FieldsFollowTheRecordAndAreReplacedWithIt) {
  Graph g;
  Node* n = g.add_node("Relu", {}, 1);
  n->doc_string = "exported from torch";
  write_decision_record(*n, {"fp16", "next-to-low", "next to a low op", {{"from", "/a/Conv (Conv)"}, {"max_error", "3e-4"}}});
  EXPECT_EQ(n->doc_string,
            "exported from torch\namp: fp16 next-to-low: next to a low op\namp.from: /a/Conv (Conv)\namp.max_error: 3e-4");
  auto r = read_decision_record(*n);
  ASSERT_TRUE(r);
  const std::vector<std::pair<std::string, std::string>> fields = {{"from", "/a/Conv (Conv)"}, {"max_error", "3e-4"}};
  EXPECT_EQ(r->fields, fields);
  write_decision_record(*n, {"fp32", "deny-list", "on the deny list", {}});
  EXPECT_EQ(n->doc_string, "exported from torch\namp: fp32 deny-list: on the deny list");
  EXPECT_TRUE(read_decision_record(*n)->fields.empty());
}

}  // namespace
}  // namespace amp
