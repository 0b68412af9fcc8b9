// Models that ONNX Runtime runs and ONNX 1.12's tools refuse or mishandle (graph/onnx_runtime_forms.h),
// built as protos here, loaded, and checked for what they mean: nodes out of order sorted, a
// Softmax of unknown rank below opset 13 converted without the converter's assertion, ONNX
// Runtime's LayerNormalization below opset 17 read as ONNX's, a Scan body value named as the Scan
// node's own output. The files of other exporters with these forms run against ONNX Runtime in
// tests/corpus.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "graph/error.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"

namespace amp {
namespace {

onnx::ValueInfoProto tensor(const std::string& name, std::vector<int64_t> dims, bool with_shape = true) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* t = vi.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  if (with_shape) {
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  return vi;
}

onnx::NodeProto* node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                      std::vector<std::string> out, const std::string& name = "") {
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

onnx::ModelProto model(int64_t opset) {
  onnx::ModelProto p;
  p.set_ir_version(opset >= 17 ? 8 : 6);
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

std::vector<std::string> ops(const Graph& g) {
  std::vector<std::string> out;
  for (const Node* n : g.nodes()) out.push_back(n->op_type());
  return out;
}

TEST(OnnxRuntimeForms, NodesOutOfOrderAreSortedOnLoad) {
  onnx::ModelProto p = model(17);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3});
  node(g, "Sigmoid", {"b"}, {"c"}, "third");
  node(g, "Relu", {"x"}, {"a"}, "first");
  node(g, "Neg", {"a"}, {"b"}, "second");
  *g.add_output() = tensor("c", {2, 3});
  const Model m = load(p);
  std::vector<std::string> names;
  for (const Node* n : m.graph->nodes()) names.push_back(n->name);
  EXPECT_EQ(names, (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_TRUE(verify(m).empty());
}

TEST(OnnxRuntimeForms, ACycleIsStillRefusedByName) {
  onnx::ModelProto p = model(17);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2});
  node(g, "Add", {"x", "b"}, {"a"}, "one");
  node(g, "Neg", {"a"}, {"b"}, "two");
  *g.add_output() = tensor("b", {2});
  try {
    load(p);
    FAIL() << "a cycle loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'one' (Add) reads 'b', which is not defined before it"), std::string::npos)
        << e.what();
  }
}

// Softmax-11 on an input whose rank nothing tells (a Reshape to a computed shape, in the opset-11
// transformer exports): ONNX's converter asserts; here it becomes Flatten -> Softmax over the 2-D
// tensor's axis 1 -> Reshape to the input's shape, which is what Softmax-11 computes.
TEST(OnnxRuntimeForms, SoftmaxOfUnknownRankBelowOpset13Converts) {
  onnx::ModelProto p = model(11);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3, 4});
  onnx::ValueInfoProto shape = tensor("shape", {});
  shape.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  shape.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("rank");
  *g.add_input() = shape;
  node(g, "Reshape", {"x", "shape"}, {"r"});  // a computed shape of unknown length: no rank
  int_attr(node(g, "Softmax", {"r"}, {"y"}, "softmax"), "axis", 2);
  *g.add_output() = tensor("y", {2, 3, 4});
  const Model m = load(p);
  EXPECT_EQ(ops(*m.graph), (std::vector<std::string>{"Reshape", "Shape", "Flatten", "Softmax", "Reshape"}));
  for (const Node* n : m.graph->nodes()) {
    if (n->op_type() == "Flatten") {
      EXPECT_EQ(n->attr_int("axis", 0), 2);
    }
    if (n->op_type() == "Softmax") {
      EXPECT_EQ(n->attr_int("axis", 0), -1);  // the 2-D tensor's last axis
    }
  }
  EXPECT_EQ(m.graph->outputs()[0]->name(), "y");
  EXPECT_TRUE(verify(m).empty());
}

// The last axis of a known rank means the same at every opset: the node stays one Softmax.
TEST(OnnxRuntimeForms, SoftmaxOnTheLastAxisStaysOneNode) {
  onnx::ModelProto p = model(11);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3, 4});
  int_attr(node(g, "LogSoftmax", {"x"}, {"y"}), "axis", 2);
  *g.add_output() = tensor("y", {2, 3, 4});
  const Model m = load(p);
  EXPECT_EQ(ops(*m.graph), (std::vector<std::string>{"LogSoftmax"}));
}

TEST(OnnxRuntimeForms, OnnxRuntimesLayerNormalizationBelowOpset17IsOnnxs) {
  onnx::ModelProto p = model(12);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 8});
  *g.add_input() = tensor("s", {8});
  *g.add_input() = tensor("b", {8});
  auto* ln = node(g, "LayerNormalization", {"x", "s", "b"}, {"ln"}, "layernorm");
  auto* eps = ln->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-3f);
  auto* typo = ln->add_attribute();  // ONNX Runtime ignores attributes the op does not have
  typo->set_name("epsion");
  typo->set_type(onnx::AttributeProto::FLOAT);
  typo->set_f(1e-12f);
  // A Softmax-12 reading it: the LayerNorm's output rank is known to the converter meanwhile.
  node(g, "Softmax", {"ln"}, {"y"});
  *g.add_output() = tensor("y", {2, 8});
  const Model m = load(p);
  EXPECT_EQ(m.opset_version(""), 17);
  EXPECT_EQ(ops(*m.graph), (std::vector<std::string>{"LayerNormalization", "Softmax"}));
  const Node* n = *m.graph->nodes().begin();
  EXPECT_EQ(n->name, "layernorm");
  EXPECT_EQ(n->domain(), "");
  EXPECT_FLOAT_EQ(n->attr_float("epsilon", 0), 1e-3f);
  EXPECT_EQ(n->attr("epsion"), nullptr);
  EXPECT_EQ(n->inputs().size(), 3u);
  EXPECT_TRUE(verify(m).empty());
}

// CNTK's Scan bodies name their outputs as the Scan node's outputs: visible in the body only after
// the node, so not shadowing; the body's value is renamed and the model verifies.
TEST(OnnxRuntimeForms, ASubgraphValueNamedAsItsNodesOutputIsNotShadowing) {
  onnx::ModelProto p = model(17);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("state", {2});
  *g.add_input() = tensor("seq", {3, 2});
  auto* scan = node(g, "Scan", {"state", "seq"}, {"out_state", "out_seq"}, "scan");
  int_attr(scan, "num_scan_inputs", 1);
  auto* body_attr = scan->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  auto& body = *body_attr->mutable_g();
  body.set_name("body");
  *body.add_input() = tensor("s_in", {2});
  *body.add_input() = tensor("x_in", {2});
  node(body, "Add", {"s_in", "x_in"}, {"out_state"});
  node(body, "Identity", {"out_state"}, {"out_seq_t"});
  *body.add_output() = tensor("out_state", {2});
  *body.add_output() = tensor("out_seq_t", {2});
  *g.add_output() = tensor("out_state", {2});
  *g.add_output() = tensor("out_seq", {3, 2});
  const Model m = load(p);
  EXPECT_TRUE(verify(m).empty());
  const Graph* sub = (*m.graph->nodes().begin())->subgraphs().at(0);
  EXPECT_NE(sub->outputs()[0]->name(), "out_state");
  EXPECT_EQ(m.graph->outputs()[0]->name(), "out_state");
}

// ONNX Runtime's SimplifiedLayerNormalization (RMS norm) in the default domain: the opset-17 nodes
// that compute it (the numbers against ONNX Runtime: tests/corpus, project_models.py's rms_norm).
TEST(OnnxRuntimeForms, OnnxRuntimesSimplifiedLayerNormalizationBecomesItsNodes) {
  onnx::ModelProto p = model(14);
  auto& g = *p.mutable_graph();
  *g.add_input() = tensor("x", {2, 3, 8});
  *g.add_input() = tensor("s", {8});
  node(g, "SimplifiedLayerNormalization", {"x", "s"}, {"y"}, "rms");
  *g.add_output() = tensor("y", {2, 3, 8});
  const Model m = load(p);
  EXPECT_EQ(ops(*m.graph), (std::vector<std::string>{"Mul", "ReduceMean", "Constant", "Add", "Sqrt", "Div", "Mul"}));
  EXPECT_EQ(m.graph->outputs()[0]->name(), "y");
  EXPECT_TRUE(verify(m).empty());
}

}  // namespace
}  // namespace amp
