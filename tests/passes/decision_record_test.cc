#include "passes/amp/decision_record.h"

#include <gtest/gtest.h>

#include "graph/graph.h"

namespace amp {
namespace {

TEST(DecisionRecord, WritesOneLineAndReadsItBack) {
  Graph g;
  Node* n = g.add_node("MatMul", {}, 1);
  write_decision_record(*n, {"fp16", "allow-list", "MatMul is on the allow list: tensor cores: fp32 accumulation"});
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
  write_decision_record(*n, {"fp32", "input-fp32", "input 'x' is fp32"});
  write_decision_record(*n, {"fp16", "inputs-low", "all its inputs are\nlow precision"});
  EXPECT_EQ(n->doc_string, "exported from torch\nsecond line\namp: fp16 inputs-low: all its inputs are low precision");
  EXPECT_EQ(read_decision_record(*n)->rule, "inputs-low");
}

TEST(DecisionRecord, MeasurementsRideOnASecondLineAndReadBackInOrder) {
  Graph g;
  Node* n = g.add_node("Conv", {}, 1);
  n->doc_string = "exported from torch";
  write_decision_record(*n, {"fp32", "calibration", "kept", {{"own_error", "inf"}, {"overflow", "12"}, {"a;b", "x=y;z"}}});
  EXPECT_EQ(n->doc_string,
            "exported from torch\namp: fp32 calibration: kept\namp-measured: own_error=inf; overflow=12; a,b=x=y,z");
  const auto r = read_decision_record(*n);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rule, "calibration");
  using M = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(r->measurements, (M{{"own_error", "inf"}, {"overflow", "12"}, {"a,b", "x=y,z"}}));
  // Writing again without measurements drops the old ones.
  write_decision_record(*n, {"fp16", "allow-list", "Conv is on the allow list"});
  EXPECT_EQ(n->doc_string, "exported from torch\namp: fp16 allow-list: Conv is on the allow list");
  EXPECT_TRUE(read_decision_record(*n)->measurements.empty());
}

TEST(DecisionRecord, NodesWithoutARecordHaveNone) {
  Graph g;
  Node* n = g.add_node("Relu", {}, 1);
  EXPECT_FALSE(read_decision_record(*n));
  n->doc_string = "amp: malformed";
  EXPECT_FALSE(read_decision_record(*n));
}

}  // namespace
}  // namespace amp
