#include "passes/amp/amp_policy.h"

#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/graph.h"

namespace amp {
namespace {

TEST(AmpPolicy, DefaultListsNameRealOpsWithReasons) {
  register_amp_op_schemas();
  const AmpPolicy policy;
  EXPECT_GT(policy.lists().size(), 100u);
  for (const auto& [op, entry] : policy.lists()) {
    const size_t colon = op.rfind(':');  // "ai.onnx_amp:Gelu": the project's own op
    if (colon == std::string::npos) {
      EXPECT_NE(onnx::OpSchemaRegistry::Schema(op, 17, ""), nullptr) << op << " is not an ONNX op at opset 17";
    } else {
      EXPECT_EQ(op.substr(0, colon), kAmpDomain) << op;
      EXPECT_NE(onnx::OpSchemaRegistry::Schema(op.substr(colon + 1), kAmpDomainVersion, kAmpDomain), nullptr) << op;
    }
    EXPECT_FALSE(entry.reason.empty()) << op;
  }
  EXPECT_EQ(policy.entry(kAmpDomain, "Gelu")->category, OpCategory::kInfer);
  EXPECT_EQ(policy.entry("", "MatMul")->category, OpCategory::kAllow);
  EXPECT_EQ(policy.entry("", "Softmax")->category, OpCategory::kDeny);
  EXPECT_EQ(policy.entry("", "Add")->category, OpCategory::kInfer);
  EXPECT_EQ(policy.entry("", "Reshape")->category, OpCategory::kClear);
  EXPECT_EQ(policy.entry("", "Range"), nullptr);
  EXPECT_TRUE(policy.keep_io_types);
  EXPECT_EQ(policy.weights, WeightStorage::kKeep);
}

TEST(AmpPolicy, EditsMoveAndRemoveOps) {
  AmpPolicy policy;
  policy.apply({OpListEdits{{{OpCategory::kInfer, {"Softmax"}}, {OpCategory::kAllow, {"-Conv"}}}, "flags"},
                OpListEdits{{{OpCategory::kDeny, {"ai.onnx.preview.training:Adam"}}}, "policy.json"}});
  EXPECT_EQ(policy.entry("", "Softmax")->category, OpCategory::kInfer);
  EXPECT_EQ(policy.entry("", "Softmax")->reason, "put on the infer list (flags)");
  EXPECT_EQ(policy.entry("", "Conv"), nullptr);
  EXPECT_EQ(policy.entry("ai.onnx.preview.training", "Adam")->category, OpCategory::kDeny);
}

TEST(AmpPolicy, ConflictingOrUnknownEditsAreInputErrors) {
  auto fails = [](std::vector<OpListEdits> edits, const std::string& message) {
    AmpPolicy policy;
    try {
      policy.apply(edits);
      ADD_FAILURE() << "no error for " << message;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  fails({OpListEdits{{{OpCategory::kAllow, {"Exp"}}}, "flags"}, OpListEdits{{{OpCategory::kClear, {"Exp"}}}, "a.json"}},
        "Exp is put on two lists: the allow list (flags) and the clear list (a.json)");
  fails({OpListEdits{{{OpCategory::kAllow, {"Matmul"}}}, "flags"}}, "'Matmul' on the allow list (flags) is not an ONNX op");
  fails({OpListEdits{{{OpCategory::kAllow, {"com.example:Fused"}}}, "flags"}}, "is not an ONNX op");
  fails({OpListEdits{{{OpCategory::kDeny, {"-MatMul"}}}, "flags"}}, "MatMul is not on that list");
  fails({OpListEdits{{{OpCategory::kAllow, {"-MatMul", "MatMul"}}}, "flags"}}, "both put on and taken off");
}

TEST(AmpPolicy, TargetsAreTheTwo16BitFloatTypes) {
  EXPECT_EQ(AmpPolicy(DType::kBFloat16).target(), DType::kBFloat16);
  EXPECT_THROW(AmpPolicy(DType::kDouble), InputError);
}

TEST(AmpPolicy, NodesAreBlockedByWholeNameRegex) {
  AmpPolicy policy;
  policy.block_nodes("/blocks\\.0/.*");
  Graph g;
  Node* a = g.add_node("MatMul", {}, 1);
  a->name = "/blocks.0/attn/MatMul";
  Node* b = g.add_node("MatMul", {}, 1);
  b->name = "/blocks.10/attn/MatMul";
  ASSERT_NE(policy.blocked_by(*a), nullptr);
  EXPECT_EQ(*policy.blocked_by(*a), "/blocks\\.0/.*");
  EXPECT_EQ(policy.blocked_by(*b), nullptr);
  EXPECT_THROW(policy.block_nodes("[unclosed"), InputError);
}

}  // namespace
}  // namespace amp
