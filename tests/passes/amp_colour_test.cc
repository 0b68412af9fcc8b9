// Precision colouring, one test per rule: each builds a small graph and checks every node's
// precision and rule against what grappler's passes (and the PyTorch-style step 5) say it must be.
#include <gtest/gtest.h>

#include "passes/amp/colour.h"
#include "tests/passes/amp_model_builder.h"

namespace amp {
namespace {

using test::ModelBuilder;

// "precision rule" of the node producing `value`.
std::string decided(const AmpDecisions& d, const ModelBuilder& b, const std::string& value) {
  const NodeDecision* nd = d.find(b.producer(value));
  if (!nd) return "(no decision)";
  return precision_name(nd->decision.precision, d.target) + " " + rule_name(nd->decision.rule);
}

TEST(AmpColour, GrapplerExampleDenyInferClearAllow) {
  // grappler's documented example: deny -> infer -> clear -> infer -> clear -> allow -> infer
  // becomes deny -> deny -> deny -> deny -> clear(low) -> allow -> infer(low, PyTorch-style).
  ModelBuilder b;
  Value* x = b.input("x");
  Value* s = b.op("Softmax", {x}, "s");
  Value* a = b.op("Add", {s, b.weight("c1", {2, 8})}, "a");
  Value* r = b.op("Reshape", {a, b.int64s("shape", {2, 8})}, "r");
  Value* m = b.op("Mul", {r, b.weight("c2", {2, 8})}, "m");
  Value* t = b.op("Transpose", {m}, "t", DType::kFloat, test::attrs(Attribute::of_ints("perm", {0, 1})));
  Value* y = b.op("MatMul", {t, b.weight("w")}, "y");
  Value* z = b.op("Relu", {y}, "z");
  b.output(z);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "s"), "fp32 deny-list");
  EXPECT_EQ(decided(d, b, "a"), "fp32 deny-path");
  EXPECT_EQ(decided(d, b, "r"), "fp32 deny-path");
  EXPECT_EQ(decided(d, b, "m"), "fp32 deny-path");
  EXPECT_EQ(decided(d, b, "t"), "fp16 next-to-low");
  EXPECT_EQ(decided(d, b, "y"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "z"), "fp16 inputs-low");
}

TEST(AmpColour, DenyRegionIsNotBrokenByClearOps) {
  // softmax -> reshape -> reduce-sum: the reshape between two deny ops stays fp32, no casts.
  ModelBuilder b;
  Value* s = b.op("Softmax", {b.input("x")}, "s");
  Value* r = b.op("Reshape", {s, b.int64s("shape", {2, 8})}, "r");
  Value* y = b.op("ReduceSum", {r}, "y", DType::kFloat, {}, nullptr, Shape::of({}));
  Value* t = b.op("Transpose", {s}, "t");  // a clear op leading nowhere is not painted
  b.output(y);
  b.output(t);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "r"), "fp32 deny-path");
  EXPECT_EQ(decided(d, b, "y"), "fp32 deny-list");
  EXPECT_EQ(decided(d, b, "t"), "fp32 input-fp32");
}

// REFERENCE §2 failure 5 (NaN after conversion in ReduceMean / softmax paths): a layer norm
// decomposed into ReduceMean, Sub, Pow, Sqrt and Div stays fp32 from the first reduction to the
// last division, between two low products.
TEST(AmpColour, DecomposedLayerNormStaysFp32) {
  ModelBuilder b;
  Value* h = b.op("MatMul", {b.input("x"), b.weight("w1")}, "h");
  Value* mean = b.op("ReduceMean", {h}, "mean", DType::kFloat, {}, nullptr, Shape::of({2, 1}));
  Value* d = b.op("Sub", {h, mean}, "d");
  Value* sq = b.op("Pow", {d, b.weight("two", {})}, "sq");
  Value* var = b.op("ReduceMean", {sq}, "var", DType::kFloat, {}, nullptr, Shape::of({2, 1}));
  Value* std = b.op("Sqrt", {b.op("Add", {var, b.weight("eps", {})}, "var_eps")}, "std");
  Value* n = b.op("Div", {d, std}, "n");
  b.output(b.op("MatMul", {n, b.weight("w2")}, "y"));
  const AmpDecisions dec = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(dec, b, "h"), "fp16 allow-list");
  EXPECT_EQ(decided(dec, b, "mean"), "fp32 deny-list");
  EXPECT_EQ(decided(dec, b, "d"), "fp32 deny-path");
  EXPECT_EQ(decided(dec, b, "sq"), "fp32 deny-list");
  EXPECT_EQ(decided(dec, b, "var_eps"), "fp32 deny-path");
  EXPECT_EQ(decided(dec, b, "std"), "fp32 deny-path");
  EXPECT_EQ(decided(dec, b, "n"), "fp32 deny-path");
  EXPECT_EQ(decided(dec, b, "y"), "fp16 allow-list");
}

TEST(AmpColour, InferAndClearBetweenLowOpsRunLow) {
  ModelBuilder b;
  Value* h = b.op("MatMul", {b.input("x"), b.weight("w1")}, "h");
  Value* a = b.op("Add", {h, b.weight("bias", {8})}, "a");
  Value* r = b.op("Relu", {a}, "r");
  Value* y = b.op("MatMul", {r, b.weight("w2")}, "y");
  b.output(y);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "a"), "fp16 between-low");
  EXPECT_EQ(decided(d, b, "r"), "fp16 between-low");
  EXPECT_EQ(decided(d, b, "y"), "fp16 allow-list");
}

TEST(AmpColour, LowSpreadsUpstreamThroughClearOps) {
  ModelBuilder b;
  Value* f = b.op("Flatten", {b.input("x")}, "f");
  Value* y = b.op("Gemm", {f, b.weight("w"), b.weight("bias", {8})}, "y");
  b.output(y);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "f"), "fp16 next-to-low");
}

// ConvNeXt's block as torch exports it: a convolution, a Transpose to channels-last, LayerNorm (fp32),
// a Transpose back, a convolution. With the Casts at the consumers (autocast) both Transposes move
// 16-bit data; with CastPlacement::kCompute (amp-rewrite's default) they move fp32, so the Casts sit
// beside the convolutions (colouring step 6). A Transpose between two low ops stays low either way.
TEST(AmpColour, CastPlacementComputeKeepsDataMovementNextToFp32InFp32) {
  ModelBuilder b;
  const auto perm = [](std::vector<int64_t> p) { return test::attrs(Attribute::of_ints("perm", p)); };
  Value* x = b.input("x", DType::kFloat, {1, 8, 4, 4});
  Value* c1 = b.op("Conv", {x, b.weight("k1", {8, 8, 1, 1})}, "c1");
  Value* t1 = b.op("Transpose", {c1}, "t1", DType::kFloat, perm({0, 2, 3, 1}), nullptr, Shape::of({1, 4, 4, 8}));
  Value* r1 = b.op("Reshape", {t1, b.int64s("shape", {1, 4, 4, 8})}, "r1", DType::kFloat, {}, nullptr,
                   Shape::of({1, 4, 4, 8}));
  Value* ln = b.op("LayerNormalization", {r1, b.weight("g", {8}), b.weight("beta", {8})}, "ln", DType::kFloat,
                   test::attrs(Attribute::of_int("axis", -1)), nullptr, Shape::of({1, 4, 4, 8}));
  Value* t2 = b.op("Transpose", {ln}, "t2", DType::kFloat, perm({0, 3, 1, 2}), nullptr, Shape::of({1, 8, 4, 4}));
  Value* c2 = b.op("Conv", {t2, b.weight("k2", {8, 8, 1, 1})}, "c2");
  Value* t3 = b.op("Transpose", {c2}, "t3", DType::kFloat, perm({0, 1, 3, 2}), nullptr, Shape::of({1, 8, 4, 4}));
  Value* c3 = b.op("Conv", {t3, b.weight("k3", {8, 8, 1, 1})}, "c3");
  b.output(c3);

  AmpPolicy policy;
  EXPECT_EQ(policy.cast_placement, CastPlacement::kConsumer);
  AmpDecisions d = colour(b.m, policy);
  EXPECT_EQ(decided(d, b, "t1"), "fp16 next-to-low");
  EXPECT_EQ(decided(d, b, "r1"), "fp16 next-to-low");
  EXPECT_EQ(decided(d, b, "t2"), "fp16 next-to-low");
  EXPECT_EQ(decided(d, b, "t3"), "fp16 between-low");

  policy.cast_placement = CastPlacement::kCompute;
  d = colour(b.m, policy);
  EXPECT_EQ(decided(d, b, "c1"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "r1"), "fp32 next-to-fp32");
  EXPECT_EQ(decided(d, b, "t1"), "fp32 next-to-fp32");  // reached through the Reshape
  EXPECT_EQ(d.find(b.producer("t1"))->decision.from, d.find(b.producer("r1"))->ref);
  EXPECT_EQ(decided(d, b, "ln"), "fp32 deny-list");
  EXPECT_EQ(decided(d, b, "t2"), "fp32 input-fp32");  // its data comes from the LayerNorm
  EXPECT_EQ(decided(d, b, "c2"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "t3"), "fp16 between-low");
}

TEST(AmpColour, InferOpWithAnFp32InputStaysFp32) {
  // A residual add of a low product and an fp32 graph input runs in fp32 (autocast's promotion).
  ModelBuilder b;
  Value* x = b.input("x");
  Value* h = b.op("MatMul", {x, b.weight("w")}, "h");
  Value* y = b.op("Add", {h, x}, "y");
  b.output(y);
  AmpPolicy policy;
  const AmpDecisions d = colour(b.m, policy);
  EXPECT_EQ(decided(d, b, "y"), "fp32 input-fp32");
  EXPECT_EQ(d.find(b.producer("y"))->decision.reason, "input 'x' is fp32");
  // Without keep_io_types the graph input is free to be low, and so is the add.
  policy.keep_io_types = false;
  EXPECT_EQ(decided(colour(b.m, policy), b, "y"), "fp16 inputs-low");
}

TEST(AmpColour, OpsWhoseSchemaForbidsTheTargetStayFp32) {
  // Conv-11's T allows float16 but not bfloat16; MatMul-13 allows both.
  ModelBuilder b;
  Value* x = b.input("x", DType::kFloat, {1, 2, 4, 4});
  Value* c = b.op("Conv", {x, b.weight("k", {2, 2, 1, 1})}, "c");
  Value* y = b.op("MatMul", {c, b.weight("w", {4, 4})}, "y");
  b.output(y);
  EXPECT_EQ(decided(colour(b.m, AmpPolicy(DType::kFloat16)), b, "c"), "fp16 allow-list");
  const AmpDecisions d = colour(b.m, AmpPolicy(DType::kBFloat16));
  EXPECT_EQ(decided(d, b, "c"), "fp32 schema-forbids");
  EXPECT_EQ(d.find(b.producer("c"))->decision.reason, "Conv-11's type constraint T does not allow bfloat16");
  EXPECT_EQ(decided(d, b, "y"), "bf16 allow-list");
}

TEST(AmpColour, BlockedUnlistedAndNonFloatNodes) {
  ModelBuilder b;
  Value* x = b.input("x");
  Value* h = b.op("MatMul", {x, b.weight("w")}, "h");
  Value* blocked = b.op("MatMul", {h, b.weight("w2")}, "proj");
  Value* u = b.op("Atanh", {blocked}, "u");
  Value* s = b.op("Shape", {u}, "s", DType::kInt64, {}, nullptr, Shape::of({2}));
  b.output(s);
  AmpPolicy policy;
  policy.block_nodes("pro.*_node");
  // Atanh taken off its list: the default lists leave no one-input float op of opset 17 unlisted.
  policy.apply({OpListEdits{{{OpCategory::kInfer, {"-Atanh"}}}, "test"}});
  const AmpDecisions d = colour(b.m, policy);
  EXPECT_EQ(decided(d, b, "h"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "proj"), "fp32 blocked");
  EXPECT_EQ(decided(d, b, "u"), "fp32 not-listed");
  EXPECT_EQ(decided(d, b, "s"), "- no-float-data");
}

TEST(AmpColour, EditedListsAreFollowed) {
  ModelBuilder b;
  Value* s = b.op("Softmax", {b.input("x")}, "s");
  Value* y = b.op("MatMul", {s, b.weight("w")}, "y");
  b.output(y);
  AmpPolicy policy;
  policy.apply({OpListEdits{{{OpCategory::kAllow, {"Softmax", "-MatMul"}}}, "test"}});
  const AmpDecisions d = colour(b.m, policy);
  EXPECT_EQ(decided(d, b, "s"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "y"), "fp32 not-listed");
}

TEST(AmpColour, ExplainFollowsTheChainToAListRule) {
  ModelBuilder b;
  Value* h = b.op("MatMul", {b.input("x"), b.weight("w")}, "h");
  Value* r = b.op("Relu", {h}, "r");
  Value* t = b.op("Transpose", {r}, "t");
  b.output(t);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  const std::vector<std::string> chain = explain(d, *d.find("t_node"));
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0], "t_node (Transpose): fp16, inputs-low: all its inputs are low precision");
  EXPECT_EQ(chain[1], "r_node (Relu): fp16, inputs-low: all its inputs are low precision");
  EXPECT_EQ(chain[2].rfind("h_node (MatMul): fp16, allow-list: MatMul is on the allow list", 0), 0u) << chain[2];
}

TEST(AmpColour, IfBranchesAreColouredAndTheIfKeepsItsTypes) {
  ModelBuilder b;
  Value* x = b.input("x");
  Value* cond = b.input("cond", DType::kBool, {});
  Node* if_node = b.graph().add_node("If", {cond}, {"y"});
  if_node->name = "if";
  if_node->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2, 8})));
  for (const char* branch : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = branch;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>(&b.graph());
    a.g->name = branch;
    Value* out = b.op("MatMul", {x, b.weight(std::string("w_") + branch)}, std::string("o_") + branch,
                      DType::kFloat, {}, a.g.get());
    a.g->add_output(out);
    if_node->set_attr(std::move(a));
  }
  b.output(if_node->output(0));
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "y"), "fp32 control-flow");
  EXPECT_EQ(precision_name(d.find("o_then_branch_node")->decision.precision, DType::kFloat16), "fp16");
  EXPECT_EQ(precision_name(d.find("o_else_branch_node")->decision.precision, DType::kFloat16), "fp16");
}

TEST(AmpColour, ExistingCastsAreFixedAndCastsFromIntegersAreFree) {
  // A float Cast keeps its 'to'; an int -> float Cast (a mask) lets the Mul between products be low.
  ModelBuilder b;
  Value* h = b.op("MatMul", {b.input("x"), b.weight("w")}, "h");
  Value* mask = b.cast(b.input("mask", DType::kInt64), DType::kFloat, "mask_f");
  Value* m = b.op("Mul", {h, mask}, "m");
  Value* y = b.op("MatMul", {m, b.weight("w2")}, "y");
  Value* up = b.cast(y, DType::kFloat, "y32");
  b.output(up);
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "mask_f"), "fp32 cast");
  EXPECT_EQ(decided(d, b, "m"), "fp16 between-low");
  EXPECT_EQ(decided(d, b, "y32"), "fp32 cast");
}

}  // namespace
}  // namespace amp

namespace amp {
namespace {

TEST(AmpColour, ConvTransposeIsAllowListedAndRunsBf16BeyondItsSchema) {
  // ConvTranspose-11's T allows float16 but not bfloat16: a rewrite keeps it fp32 for bf16, a
  // training step (beyond_opset_schemas) runs it in bf16 like Conv.
  ModelBuilder b;
  Value* x = b.input("x", DType::kFloat, {1, 2, 4, 4});
  Value* c = b.op("ConvTranspose", {x, b.weight("k", {2, 2, 2, 2})}, "c");
  b.output(b.op("Relu", {c}, "y"));
  EXPECT_EQ(decided(colour(b.m, AmpPolicy(DType::kFloat16)), b, "c"), "fp16 allow-list");
  const AmpDecisions d = colour(b.m, AmpPolicy(DType::kBFloat16));
  EXPECT_EQ(decided(d, b, "c"), "fp32 schema-forbids");
  EXPECT_EQ(d.find(b.producer("c"))->decision.reason, "ConvTranspose-11's type constraint T does not allow bfloat16");
  AmpPolicy training(DType::kBFloat16);
  training.beyond_opset_schemas = true;
  EXPECT_EQ(decided(colour(b.m, training), b, "c"), "bf16 allow-list");
}

// ONNX Runtime's MatMul + BatchNormalization fusion (on by default) builds one Gemm in one element
// type: with the MatMul in fp16 and the BatchNormalization's parameters in fp32 the session fails
// to initialise (onnx2c's PyTorch MNIST, tests/corpus). The BatchNormalization after a MatMul,
// directly or through a Reshape, stays fp32 so that a Cast sits between them; this test fails if
// the pair comes back in mixed types. A BatchNormalization after a Gemm is not the pattern.
TEST(AmpColour, BatchNormalizationAfterMatMulStaysFp32) {
  ModelBuilder b;
  auto bn = [&](Value* x, const std::string& name) {
    return b.op("BatchNormalization", {x, b.weight(name + "_s", {8}), b.weight(name + "_b", {8}),
                                       b.weight(name + "_m", {8}), b.weight(name + "_v", {8})}, name);
  };
  Value* h = b.op("MatMul", {b.input("x"), b.weight("w1")}, "h");
  Value* n1 = bn(h, "n1");
  Value* h2 = b.op("MatMul", {b.op("Relu", {n1}, "r1"), b.weight("w2")}, "h2");
  Value* n2 = bn(b.op("Reshape", {h2, b.int64s("shape", {2, 8})}, "rs"), "n2");
  Value* g = b.op("Gemm", {b.op("Relu", {n2}, "r2"), b.weight("w3")}, "g");
  Value* n3 = bn(g, "n3");
  b.output(b.op("MatMul", {n3, b.weight("w4")}, "y"));
  const AmpDecisions d = colour(b.m, AmpPolicy());
  EXPECT_EQ(decided(d, b, "h"), "fp16 allow-list");
  EXPECT_EQ(decided(d, b, "n1"), "fp32 onnxruntime-fusion");
  EXPECT_EQ(decided(d, b, "n2"), "fp32 onnxruntime-fusion");
  EXPECT_EQ(decided(d, b, "n3"), "fp16 between-low");
}

// A QDQ model's quantized regions stay as they are: QuantizeLinear, DequantizeLinear and the ops
// between them fp32 with the reason, while an allow-listed op outside them runs low.
TEST(AmpColour, QuantizedRegionsAreLeftAlone) {
  ModelBuilder b;
  Value* scale = b.weight("scale", {});
  Value* q = b.op("QuantizeLinear", {b.input("x"), scale}, "q", DType::kUInt8);
  Value* dq = b.op("DequantizeLinear", {q, scale}, "dq");
  Value* conv = b.op("MatMul", {dq, b.weight("w1")}, "mm");
  Value* q2 = b.op("QuantizeLinear", {b.op("Relu", {conv}, "relu"), scale}, "q2", DType::kUInt8);
  Value* dq2 = b.op("DequantizeLinear", {q2, scale}, "dq2");
  b.output(b.op("MatMul", {b.op("Sigmoid", {dq2}, "sig"), b.weight("w2")}, "y"));
  const AmpDecisions d = colour(b.m, AmpPolicy());
  for (const char* v : {"q", "dq", "mm", "relu", "q2", "dq2", "sig"})
    EXPECT_EQ(decided(d, b, v), "fp32 quantized") << v;
  EXPECT_EQ(decided(d, b, "y"), "fp16 allow-list");
}

}  // namespace
}  // namespace amp
