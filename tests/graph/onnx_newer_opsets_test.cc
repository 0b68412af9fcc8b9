// Models at opsets 18-24 (graph/onnx_newer_opsets.h), built as protos here: each changed op read
// through its opset-17 form, and what has no such form refused in one line naming the node, its op
// and the opset. What the forms compute is checked against ONNX Runtime on the opset18 .. opset24
// models of tests/corpus/project_models.py (corpus.project); that the attention recogniser fuses
// opset 23's Attention again, in tests/passes/recognize_attention_test.cc.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"

namespace amp {
namespace {

onnx::ValueInfoProto tensor(const std::string& name, std::vector<int64_t> dims, bool with_shape = true,
                            int32_t type = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* t = vi.mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  if (with_shape) {
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0) shape->add_dim()->set_dim_param("n");
      else shape->add_dim()->set_dim_value(d);
    }
  }
  return vi;
}

onnx::NodeProto* node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                      std::vector<std::string> out, const std::string& name) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void string_attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void ints_initializer(onnx::GraphProto& g, const std::string& name, std::vector<int64_t> values) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::ModelProto model(int64_t opset, int64_t ir) {
  onnx::ModelProto p;
  p.set_ir_version(ir);
  auto* o = p.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  p.mutable_graph()->set_name("g");
  return p;
}

Model load(const onnx::ModelProto& p) {
  std::string bytes;
  p.SerializeToString(&bytes);
  return load_model_from_bytes(bytes, "test.onnx", ".");
}

std::string refusal(const onnx::ModelProto& p) {
  try {
    load(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(loaded)";
}

const Node* find(const Graph& g, const std::string& op) {
  for (const Node* n : g.nodes())
    if (n->op_type() == op) return n;
  return nullptr;
}

TEST(NewerOpsets, ReduceAxesInputBecomesTheAttribute) {
  onnx::ModelProto p = model(18, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3, 4});
  ints_initializer(g, "axes", {1, -1});
  int_attr(node(g, "ReduceMean", {"x", "axes"}, {"y"}, "r"), "keepdims", 0);
  *g.add_output() = tensor("y", {2});
  const Model m = load(p);
  const Node* r = find(*m.graph, "ReduceMean");
  ASSERT_NE(r, nullptr);
  ASSERT_NE(r->attr("axes"), nullptr);
  EXPECT_EQ(r->attr("axes")->ints, (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(r->inputs().size(), 1u);
  EXPECT_EQ(m.opset_version(""), 17);
  EXPECT_TRUE(verify(m).empty());
}

TEST(NewerOpsets, NoAxesWithNoopIsIdentity) {
  onnx::ModelProto p = model(18, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3});
  int_attr(node(g, "ReduceMax", {"x"}, {"y"}, "r"), "noop_with_empty_axes", 1);
  *g.add_output() = tensor("y", {2, 3});
  const Model m = load(p);
  EXPECT_EQ(find(*m.graph, "ReduceMax"), nullptr);
  EXPECT_NE(find(*m.graph, "Identity"), nullptr);
}

TEST(NewerOpsets, ComputedReduceAxesAreRefusedByNode) {
  onnx::ModelProto p = model(18, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3});
  *g.add_input() = tensor("axes", {1}, true, onnx::TensorProto::INT64);
  node(g, "ReduceL2", {"x", "axes"}, {"y"}, "norm");
  *g.add_output() = tensor("y", {}, false);
  const std::string why = refusal(p);
  EXPECT_NE(why.find("test.onnx: node 'norm' (ReduceL2) at opset 18: its axes are computed in the graph"), std::string::npos)
      << why;
}

TEST(NewerOpsets, SplitNumOutputsOfAnUnknownDimComputesTheSizes) {
  onnx::ModelProto p = model(18, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {-1, 4});
  auto* s = node(g, "Split", {"x"}, {"a", "b", "c"}, "split");
  int_attr(s, "num_outputs", 3);
  for (const char* o : {"a", "b", "c"}) *g.add_output() = tensor(o, {-1, 4});
  const Model m = load(p);
  const Node* split = find(*m.graph, "Split");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->attr("num_outputs"), nullptr);
  ASSERT_EQ(split->inputs().size(), 2u);
  EXPECT_NE(find(*m.graph, "Shape"), nullptr);
  EXPECT_NE(find(*m.graph, "Concat"), nullptr);
  EXPECT_TRUE(verify(m).empty());
}

TEST(NewerOpsets, WhatOpset17CannotSayIsRefusedInOneLine) {
  {
    onnx::ModelProto p = model(19, 9);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {1, 2, 3});
    ints_initializer(g, "pads", {0, 0, 1, 0, 0, 1});
    string_attr(node(g, "Pad", {"x", "pads"}, {"y"}, "pad"), "mode", "wrap");
    *g.add_output() = tensor("y", {1, 2, 5});
    EXPECT_NE(refusal(p).find("node 'pad' (Pad) at opset 19: mode 'wrap' came with opset 19"), std::string::npos)
        << refusal(p);
  }
  {
    onnx::ModelProto p = model(18, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {4, 4});
    ints_initializer(g, "shape", {2, 2});
    node(g, "CenterCropPad", {"x", "shape"}, {"y"}, "crop");
    *g.add_output() = tensor("y", {2, 2});
    EXPECT_NE(refusal(p).find("node 'crop' (CenterCropPad) at opset 18: CenterCropPad came with opset 18 and has no opset-17 form"),
              std::string::npos)
        << refusal(p);
  }
  {
    onnx::ModelProto p = model(18, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {1, 3, 4, 4});
    int_attr(node(g, "Resize", {"x"}, {"y"}, "resize"), "antialias", 1);
    *g.add_output() = tensor("y", {}, false);
    EXPECT_NE(refusal(p).find("node 'resize' (Resize) at opset 18: antialias came with opset 18"), std::string::npos)
        << refusal(p);
  }
  {
    onnx::ModelProto p = model(25, 12);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {2});
    node(g, "Relu", {"x"}, {"y"}, "relu");
    *g.add_output() = tensor("y", {2});
    EXPECT_NE(refusal(p).find("test.onnx: unsupported opset 25 of domain 'ai.onnx' (this build reads up to opset 24)"),
              std::string::npos)
        << refusal(p);
  }
  {
    onnx::ModelProto p = model(19, 9);  // a float8 input: IR 9's type
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {2}, true, 17);
    int_attr(node(g, "Cast", {"x"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
    *g.add_output() = tensor("y", {2});
    EXPECT_NE(refusal(p).find("test.onnx: 'x' has element type 17 (float8, int4 or float4, after IR version 8)"),
              std::string::npos)
        << refusal(p);
  }
}

// Ops opset 18 added with no opset-17 form that ai.onnx_amp computes (graph/amp_ops.cc registers
// ONNX's schema under the same name): the bitwise ops, and ScatterElements / ScatterND with the
// reductions max and min, are carried into that domain as they are, checked and typed by their
// schemas there.
TEST(NewerOpsets, BitwiseOpsAndScatterMaxMinAreCarriedIntoAiOnnxAmp) {
  onnx::ModelProto p = model(18, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("a", {2, 3}, true, onnx::TensorProto::INT32);
  *g.add_input() = tensor("b", {3}, true, onnx::TensorProto::INT32);
  *g.add_input() = tensor("x", {4, 3});
  *g.add_input() = tensor("u", {2, 3});
  ints_initializer(g, "rows", {1, 3});
  g.mutable_initializer(0)->add_dims(1);  // [2, 1]: two index tuples of one coordinate
  ints_initializer(g, "at", {0, 3, 3, 1, 0, 0});
  g.mutable_initializer(1)->set_dims(0, 2);
  g.mutable_initializer(1)->add_dims(3);  // [2, 3]: a repeated row in column 0
  node(g, "BitwiseAnd", {"a", "b"}, {"and"}, "and");
  node(g, "BitwiseNot", {"and"}, {"not"}, "not");
  string_attr(node(g, "ScatterElements", {"x", "at", "u"}, {"max"}, "scatter_max"), "reduction", "max");
  string_attr(node(g, "ScatterND", {"max", "rows", "u"}, {"min"}, "scatter_min"), "reduction", "min");
  *g.add_output() = tensor("not", {}, false, onnx::TensorProto::INT32);
  *g.add_output() = tensor("min", {}, false);
  const Model m = load(p);
  EXPECT_TRUE(verify(m).empty());
  for (const char* op : {"BitwiseAnd", "BitwiseNot", "ScatterElements", "ScatterND"}) {
    const Node* n = find(*m.graph, op);
    ASSERT_NE(n, nullptr) << op;
    EXPECT_EQ(n->domain(), kAmpDomain) << op;
  }
  const Value* out = m.graph->lookup("not");
  ASSERT_TRUE(out->type().shape.has_value());
  EXPECT_EQ(out->dtype(), DType::kInt32);
  EXPECT_EQ(out->type().shape->dims.size(), 2u);  // [2, 3]: the operands broadcast
  EXPECT_EQ(find(*m.graph, "ScatterND")->attr_string("reduction", ""), "min");
}

// AffineGrid (opset 20) becomes its function body in opset-17 ops (its grids against PyTorch's:
// AmpRun.Opset20AffineGridMatchesTorch); which of 2-D and 3-D it is must be declared.
TEST(NewerOpsets, AffineGridBecomesItsFunctionBody) {
  {
    onnx::ModelProto p = model(20, 9);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("theta", {2, 2, 3});
    ints_initializer(g, "size", {2, 3, 4, 5});
    int_attr(node(g, "AffineGrid", {"theta", "size"}, {"grid"}, "affine_grid"), "align_corners", 1);
    *g.add_output() = tensor("grid", {2, 4, 5, 2});
    const Model m = load(p);
    EXPECT_EQ(find(*m.graph, "AffineGrid"), nullptr);
    EXPECT_NE(find(*m.graph, "MatMul"), nullptr);
    EXPECT_EQ(m.opset_version(""), 17);
    EXPECT_TRUE(verify(m).empty());
  }
  {
    onnx::ModelProto p = model(20, 9);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("theta", {}, false);
    *g.add_input() = tensor("size", {}, false, onnx::TensorProto::INT64);
    node(g, "AffineGrid", {"theta", "size"}, {"grid"}, "affine_grid");
    *g.add_output() = tensor("grid", {}, false);
    EXPECT_NE(refusal(p).find("node 'affine_grid' (AffineGrid) at opset 20: the length of its size (4 or 5) is not "
                              "declared, nor theta's shape"),
              std::string::npos)
        << refusal(p);
  }
  {
    onnx::ModelProto p = model(20, 9);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("theta", {2, 2, 3});
    ints_initializer(g, "size", {2, 4, 5});
    node(g, "AffineGrid", {"theta", "size"}, {"grid"}, "affine_grid");
    *g.add_output() = tensor("grid", {}, false);
    EXPECT_NE(refusal(p).find("node 'affine_grid' (AffineGrid) at opset 20: its size has 3 values, not 4 (2-D) or 5 (3-D)"),
              std::string::npos)
        << refusal(p);
  }
}

// DeformConv (opset 19) and Col2Im (opset 18) have schemas in ai.onnx_amp: the import carries them
// there unchanged, and ONNX's shape inference of those schemas types their outputs.
TEST(NewerOpsets, DeformConvAndCol2ImAreCarriedIntoTheAmpDomain) {
  {
    onnx::ModelProto p = model(19, 9);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {1, 2, 4, 4});
    *g.add_input() = tensor("w", {2, 2, 3, 3});
    *g.add_input() = tensor("offset", {1, 18, 2, 2});
    int_attr(node(g, "DeformConv", {"x", "w", "offset"}, {"y"}, "deform"), "offset_group", 1);
    *g.add_output() = tensor("y", {}, false);
    const Model m = load(p);
    const Node* d = find(*m.graph, "DeformConv");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->domain(), kAmpDomain);
    EXPECT_EQ(d->attr_int("offset_group", 0), 1);
    EXPECT_EQ(m.graph->outputs().at(0)->type().shape->str(), "[1,2,2,2]");
    EXPECT_TRUE(verify(m).empty());
  }
  {
    onnx::ModelProto p = model(18, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {1, 8, 9});
    ints_initializer(g, "image", {4, 4});
    ints_initializer(g, "block", {2, 2});
    node(g, "Col2Im", {"x", "image", "block"}, {"y"}, "fold");
    *g.add_output() = tensor("y", {}, false);
    const Model m = load(p);
    const Node* f = find(*m.graph, "Col2Im");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->domain(), kAmpDomain);
    EXPECT_EQ(m.graph->outputs().at(0)->type().shape->str(), "[1,2,4,4]");
    EXPECT_TRUE(verify(m).empty());
  }
}

TEST(NewerOpsets, GeluBecomesTheFormTorchsExporterWrites) {
  onnx::ModelProto p = model(20, 9);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 8});
  node(g, "Gelu", {"x"}, {"y"}, "gelu");
  *g.add_output() = tensor("y", {2, 8});
  const Model m = load(p);
  EXPECT_NE(find(*m.graph, "Erf"), nullptr);
  EXPECT_EQ(find(*m.graph, "CastLike"), nullptr);  // the type is known: typed constants
  EXPECT_TRUE(verify(m).empty());
}

// Two slips ONNX Runtime lets pass: an output declared with a shape its node does not make, and a
// value_info entry without a type.
TEST(NewerOpsets, ContradictingDeclaredShapesAndUntypedValueInfoAreIgnored) {
  onnx::ModelProto p = model(17, 8);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {20});
  int_attr(node(g, "Cast", {"x"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
  *g.add_output() = tensor("y", {});  // declared rank 0; the Cast makes [20]
  g.add_value_info()->set_name("y");  // no type
  const Model m = load(p);
  ASSERT_TRUE(m.graph->outputs().at(0)->type().shape.has_value());
  EXPECT_EQ(m.graph->outputs().at(0)->type().shape->rank(), 1u);
}

// Graph outputs without a type (onnxconverter-common's test_subgraph: its output and its If
// branches' outputs carry none; ONNX Runtime infers them): the main graph's typed by ONNX's shape
// inference on import, the branches' by the import's own inference. The branches return [1] and a scalar, so the If's output has an element type but no
// rank: read without a shape (the CPU backend runs either branch), and a writer names it.
TEST(NewerOpsets, UntypedGraphOutputsAreTypedByInference) {
  auto branch = [](const std::string& name, bool unsqueeze) {
    onnx::GraphProto b;
    b.set_name(name);
    if (unsqueeze) {
      ints_initializer(b, name + "_axes", {0});
      node(b, "Unsqueeze", {"a", name + "_axes"}, {name + "_out"}, name + "_unsqueeze");
    } else {
      node(b, "Identity", {"a"}, {name + "_out"}, name + "_identity");
    }
    b.add_output()->set_name(name + "_out");
    b.mutable_output(0)->mutable_type();  // an empty TypeProto, as the file has
    return b;
  };
  for (bool same_rank : {false, true}) {
    SCOPED_TRACE(same_rank ? "both branches rank 0" : "ranks 1 and 0");
    onnx::ModelProto p = model(17, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {});
    *g.add_input() = tensor("y", {});
    node(g, "Add", {"x", "y"}, {"a"}, "add");
    *g.add_initializer() = [] {
      onnx::TensorProto t;
      t.set_name("zero");
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.add_float_data(0.0f);
      return t;
    }();
    node(g, "Greater", {"a", "zero"}, {"cond"}, "greater");
    auto* n = node(g, "If", {"cond"}, {"result"}, "if");
    for (const char* attr : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(attr);
      a->set_type(onnx::AttributeProto::GRAPH);
      *a->mutable_g() = branch(attr, std::string(attr) == "then_branch" && !same_rank);
    }
    g.add_output()->set_name("result");  // no type at all
    const Model m = load(p);
    const ValueType& out = m.graph->outputs().at(0)->type();
    EXPECT_EQ(out.elem, DType::kFloat);
    EXPECT_EQ(out.shape.has_value(), same_rank);
    const Node* if_node = find(*m.graph, "If");
    ASSERT_NE(if_node, nullptr);
    ASSERT_EQ(if_node->subgraphs().size(), 2u);
    for (const Graph* b : if_node->subgraphs()) {
      const ValueType& t = b->outputs().at(0)->type();
      EXPECT_EQ(t.elem, DType::kFloat);
      ASSERT_TRUE(t.shape.has_value());
      EXPECT_EQ(t.shape->rank(), b->outputs().at(0)->name() == "then_branch_out" && !same_rank ? 1u : 0u);
    }
  }
}

// More slips ONNX Runtime lets pass (tracel-ai/burn-onnx's test models): a Reduce op's empty 'axes'
// (read as absent: all axes) and a Loop body whose input redefines the main graph's input 'x'
// (ONNX Runtime reads the body's own inside the body: so does the import, which renames it).
TEST(NewerOpsets, EmptyReduceAxesAndShadowingSubgraphNamesAreReadAsOnnxRuntimeReadsThem) {
  {
    onnx::ModelProto p = model(16, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("x", {2, 3});
    auto* r = node(g, "ReduceMax", {"x"}, {"y"}, "max");
    auto* axes = r->add_attribute();
    axes->set_name("axes");
    axes->set_type(onnx::AttributeProto::INTS);  // and no values
    *g.add_output() = tensor("y", {1, 1});
    const Model m = load(p);
    const Node* n = find(*m.graph, "ReduceMax");
    ASSERT_NE(n, nullptr);
    EXPECT_TRUE(n->attr_ints("axes").empty());
    EXPECT_EQ(m.graph->outputs().at(0)->type().shape->rank(), 2u);
  }
  {
    onnx::ModelProto p = model(16, 8);
    auto& g = *p.mutable_graph();
    *g.add_input() = tensor("M", {}, true, onnx::TensorProto::INT64);
    *g.add_input() = tensor("cond", {}, true, onnx::TensorProto::BOOL);
    *g.add_input() = tensor("x", {2, 3});
    onnx::GraphProto body;
    body.set_name("body");
    *body.add_input() = tensor("i", {}, true, onnx::TensorProto::INT64);
    *body.add_input() = tensor("c", {}, true, onnx::TensorProto::BOOL);
    *body.add_input() = tensor("x", {2, 3});  // the main graph's 'x' again
    node(body, "Identity", {"c"}, {"c_out"}, "keep");
    node(body, "Add", {"x", "x"}, {"x_out"}, "double");
    *body.add_output() = tensor("c_out", {}, true, onnx::TensorProto::BOOL);
    *body.add_output() = tensor("x_out", {2, 3});
    auto* loop = node(g, "Loop", {"M", "cond", "x"}, {"y"}, "loop");
    auto* a = loop->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body;
    *g.add_output() = tensor("y", {2, 3});
    const Model m = load(p);
    const Node* l = find(*m.graph, "Loop");
    ASSERT_NE(l, nullptr);
    const Graph& b = *l->subgraphs().at(0);
    const Value* inner = b.inputs().at(2);
    EXPECT_NE(inner->name(), "x");
    const Node* add = find(b, "Add");
    ASSERT_NE(add, nullptr);
    EXPECT_EQ(add->inputs().at(0), inner);  // the body's own, not the main graph's
    EXPECT_EQ(add->inputs().at(1), inner);
  }
}

}  // namespace
}  // namespace amp
