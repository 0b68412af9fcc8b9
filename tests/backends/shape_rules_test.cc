// The shape rules (graph/ops/shape_rules.h) against the CPU op table: every op the CPU backend
// claims in the default domain, and every elementwise row, has its rule in the one place (and every
// row a CPU kernel). The rules themselves are checked where they are
// applied: with every dim known by the CPU kernel tests and ONNX's node tests, with partial
// knowledge by tests/passes/complete_shapes_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/graph.h"
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

// ai.onnx_amp DeformConv and Col2Im (ONNX opsets 19 and 18) with part of the facts known: an
// unnamed batch dim passes through, offsets of the wrong size and Col2Im blocks that do not fill
// the image are refused in one line.
TEST(ShapeRules, DeformConvAndCol2ImFromPartialFacts) {
  Graph g;
  auto facts = [](DType t, std::vector<std::optional<int64_t>> dims) {
    TensorFacts f;
    f.dtype = t;
    f.shape = Shape{};
    for (const auto& d : dims) f.shape->dims.push_back(d ? Dim::fixed(*d) : Dim{});
    return f;
  };
  Value* in = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({1})));
  Node* deform = g.add_node("DeformConv", {in, in, in}, std::vector<std::string>{"y"}, kAmpDomain);
  deform->set_attr(Attribute::of_ints("strides", {2, 1}));
  deform->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  deform->set_attr(Attribute::of_int("offset_group", 2));
  const TensorFacts x = facts(DType::kFloat, {std::nullopt, 4, 7, 6}), w = facts(DType::kFloat, {6, 4, 3, 3});
  const TensorFacts offset = facts(DType::kFloat, {std::nullopt, 36, 4, 6}), bad = facts(DType::kFloat, {std::nullopt, 18, 4, 6});
  const auto y = infer_output_facts(*deform, 1, {&x, &w, &offset}, {TensorFacts{}});
  ASSERT_TRUE(y && (*y)[0].shape);
  const Shape want_y{{Dim{}, Dim::fixed(6), Dim::fixed(4), Dim::fixed(6)}};
  EXPECT_EQ((*y)[0].shape->str(), want_y.str());
  try {
    infer_output_facts(*deform, 1, {&x, &w, &bad}, {TensorFacts{}});
    ADD_FAILURE() << "an offset of 18 channels for 2 offset groups of 3x3 taps passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("DeformConv's offset must be"), std::string::npos) << e.what();
  }

  Node* col2im = g.add_node("Col2Im", {in, in, in}, std::vector<std::string>{"z"}, kAmpDomain);
  col2im->set_attr(Attribute::of_ints("strides", {2, 2}));
  auto ints = [](std::vector<int64_t> v) {
    TensorFacts f = TensorFacts::of(DType::kInt64, {static_cast<int64_t>(v.size())});
    f.value = Tensor(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::memcpy(f.value->mutable_data(), v.data(), v.size() * sizeof(int64_t));
    return f;
  };
  const TensorFacts image = ints({4, 4}), block = ints({2, 2});
  const TensorFacts blocks = facts(DType::kFloat16, {std::nullopt, 8, 4}), short_of = facts(DType::kFloat16, {1, 8, 3});
  const auto z = infer_output_facts(*col2im, 1, {&blocks, &image, &block}, {TensorFacts{}});
  ASSERT_TRUE(z && (*z)[0].shape);
  EXPECT_EQ((*z)[0].dtype, DType::kFloat16);
  const Shape want_z{{Dim{}, Dim::fixed(2), Dim::fixed(4), Dim::fixed(4)}};
  EXPECT_EQ((*z)[0].shape->str(), want_z.str());
  try {
    infer_output_facts(*col2im, 1, {&short_of, &image, &block}, {TensorFacts{}});
    ADD_FAILURE() << "3 blocks of 2x2 at stride 2 passed for a 4x4 image";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Col2Im's input has 3 blocks, the image takes 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amp::test
