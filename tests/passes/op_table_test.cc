// The elementwise op table (graph/ops/elementwise_ops.inc) against the policy kept elsewhere and
// against ONNX: every row's node is an ONNX op whose schema has the row's float attributes with the
// row's defaults; has a gradient rule (passes/autodiff), stops gradients (non_differentiable_ops),
// or is listed below with the reason it has neither; and has an entry on the precision lists
// (passes/amp/op_lists.inc) or is listed below with the reason it needs none. A new row fails
// here until its policy is written down.
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <map>
#include <string>

#include "graph/amp_ops.h"
#include "graph/ops/elementwise_ops.h"
#include "passes/amp/amp_policy.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp::test {
namespace {

// Rows (by qualified op type) that neither have a gradient rule nor stop gradients, and why.
const std::map<std::string, std::string> kNoGradientRule = {
    {"ai.onnx_amp:GeluGrad",
     "a gradient op: autodiff emits it in the backward pass and never differentiates a backward (no second derivatives)"},
};

// Rows that need no entry on the precision lists, and why.
const std::map<std::string, std::string> kNoPrecisionList = {
    {"Cast", "the colouring decides every Cast itself: a Cast runs in its target type (passes/amp/colour.cc)"},
    {"ai.onnx_amp:GeluGrad",
     "a gradient op: autodiff emits it after the precision passes ran, in the precision of its forward op"},
};

std::string qualified(const ElemNode& node) {
  return node.domain[0] ? std::string(node.domain) + ":" + node.op : std::string(node.op);
}

template <class F>
void for_each_row(F f) {
  for (int k = static_cast<int>(ElemOp::kConstant) + 1; k < kNumElemOps; ++k) f(elem_op_info(static_cast<ElemOp>(k)));
}

TEST(OpTable, EveryRowIsAnOnnxOpWithTheRowsAttributesAndDefaults) {
  register_amp_op_schemas();
  for_each_row([](const ElemOpInfo& info) {
    const int version = info.node.domain[0] ? kAmpDomainVersion : 17;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(info.node.op, version, info.node.domain);
    ASSERT_NE(schema, nullptr) << info.name << ": no ONNX schema for " << qualified(info.node);
    for (const ElemParam* p : {&info.params.alpha, &info.params.beta}) {
      if (!p->attr) continue;
      auto a = schema->attributes().find(p->attr);
      ASSERT_NE(a, schema->attributes().end()) << info.name << ": ONNX's " << info.node.op << " has no " << p->attr;
      EXPECT_EQ(a->second.default_value.f(), p->fallback) << info.name << "." << p->attr << ": ONNX's default differs";
    }
    if (info.node.variant) {
      EXPECT_TRUE(schema->attributes().count(info.node.variant)) << info.name << ": no attribute " << info.node.variant;
    }
  });
}

TEST(OpTable, EveryRowHasAGradientRuleOrAReasonWhyNot) {
  for_each_row([](const ElemOpInfo& info) {
    const std::string op = qualified(info.node);
    const bool rule = gradient_rules().count(op) > 0;
    const bool stops = !info.node.domain[0] && non_differentiable_ops().count(op) > 0;
    const bool excused = kNoGradientRule.count(op) > 0;
    EXPECT_TRUE(rule || stops || excused)
        << info.name << ": " << op
        << " has no gradient rule (passes/autodiff), is not in non_differentiable_ops(), and kNoGradientRule gives no reason";
    EXPECT_FALSE(excused && (rule || stops)) << op << " is excused from a gradient rule but has one: drop the excuse";
    if (info.yields_bool()) {
      EXPECT_TRUE(stops) << op << " yields bool: gradients stop there";
    }
  });
}

TEST(OpTable, EveryRowIsOnThePrecisionListsOrSaysWhyNot) {
  const AmpPolicy policy(DType::kFloat16);
  for_each_row([&](const ElemOpInfo& info) {
    const std::string op = qualified(info.node);
    const bool listed = policy.entry(info.node.domain, info.node.op) != nullptr;
    const bool excused = kNoPrecisionList.count(op) > 0;
    EXPECT_TRUE(listed || excused) << info.name << ": " << op
                                   << " is on no list of passes/amp/op_lists.inc, and kNoPrecisionList gives no reason";
    EXPECT_FALSE(listed && excused) << op << " is excused from the precision lists but is on one: drop the excuse";
  });
}

}  // namespace
}  // namespace amp::test
