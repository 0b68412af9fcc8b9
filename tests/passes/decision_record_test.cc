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

TEST(DecisionRecord, NodesWithoutARecordHaveNone) {
  Graph g;
  Node* n = g.add_node("Relu", {}, 1);
  EXPECT_FALSE(read_decision_record(*n));
  n->doc_string = "amp: malformed";
  EXPECT_FALSE(read_decision_record(*n));
}

}  // namespace
}  // namespace amp
