// The shape rules (graph/ops/shape_rules.h) against the CPU op table: every op the CPU backend
// claims in the default domain, and every elementwise row, has its rule in the one place (and every
// row a CPU kernel). The rules themselves are checked where they are
// applied: with every dim known by the CPU kernel tests and ONNX's node tests, with partial
// knowledge by tests/passes/complete_shapes_test.cc.
#include <gtest/gtest.h>

#include <set>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel.h"
#include "graph/amp_ops.h"
#include "graph/ops/elementwise_ops.h"
#include "graph/ops/shape_rules.h"

namespace amp::test {
namespace {

TEST(ShapeRules, EveryOpTheCpuBackendClaimsAndEveryRowHasOne) {
  for (const cpu::OpEntry& e : cpu::op_table()) EXPECT_NE(find_shape_rule("", e.op), nullptr) << e.op;
  for (int k = static_cast<int>(ElemOp::kConstant) + 1; k < kNumElemOps; ++k) {
    const ElemNode& node = elem_op_info(static_cast<ElemOp>(k)).node;
    EXPECT_NE(find_shape_rule(node.domain, node.op), nullptr) << node.op;
    EXPECT_NE(cpu::find_op(node.domain, node.op), nullptr) << node.op << ": a row without a CPU kernel";
  }
}

// The ops of opsets 18+ that the import carries into ai.onnx_amp, which the CPU runs there.
TEST(ShapeRules, EveryOpset18OpTheCpuRunsInAiOnnxAmpHasOne) {
  for (const auto* family : {&cpu::bitwise_ops(), &cpu::scatter_elements_opset18_ops(), &cpu::scatter_nd_opset18_ops()})
    for (const cpu::OpEntry& e : *family) EXPECT_NE(find_shape_rule(kAmpDomain, e.op), nullptr) << e.op;
}

}  // namespace
}  // namespace amp::test
