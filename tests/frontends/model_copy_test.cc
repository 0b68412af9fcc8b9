// copy_model (frontends/lib/model_copy.h), which calibration's evaluations rewrite instead of a
// serialised clone: the copy writes the same ONNX bytes as the original, shares the weights' bytes
// until one is written, and a model with a subgraph is copied too (through clone_model).
#include <gtest/gtest.h>

#include <cstring>

#include "frontends/lib/model_copy.h"
#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

Model model(const std::string& name) { return load_model(test::source_dir() + "/models/" + name); }

class ModelCopy : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelCopy, WritesTheSameBytesAndSharesTheWeights) {
  const Model m = model(GetParam());
  const Model c = copy_model(m);
  EXPECT_TRUE(serialize_model(c) == serialize_model(m)) << "the copy writes other bytes; " << structural_diff(m, c);
  ASSERT_FALSE(m.graph->initializers().empty());
  for (const Value* v : m.graph->initializers()) {
    const Value* w = c.graph->value(v->name());
    ASSERT_NE(w, nullptr) << v->name();
    EXPECT_EQ(w->initializer().data(), v->initializer().data()) << v->name() << " was copied";
  }
}

INSTANTIATE_TEST_SUITE_P(RepositoryModels, ModelCopy, ::testing::Values("mlp.onnx", "cnn.onnx", "gpt.onnx"));

TEST(ModelCopyWrite, WritingTheCopysWeightLeavesTheOriginal) {
  const Model m = model("mlp.onnx");
  Model c = copy_model(m);
  const Value* original = m.graph->initializers().front();
  const std::string before(reinterpret_cast<const char*>(original->initializer().data()), original->initializer().nbytes());
  Tensor& t = c.graph->value(original->name())->mutable_initializer();
  std::memset(t.mutable_data(), 0x7f, t.nbytes());
  EXPECT_NE(t.data(), original->initializer().data());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(original->initializer().data()), original->initializer().nbytes()),
            before);
}

// An If's branches are graphs of their own (and read the main graph's values): copied whole.
TEST(ModelCopyWrite, AModelWithASubgraphIsCopiedWhole) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2})));
  Value* cond = g.add_input("cond", ValueType::tensor(DType::kBool, Shape::of({})));
  Node* n = g.add_node("If", {cond}, {"y"});
  n->name = "branch";
  for (const char* name : {"then_branch", "else_branch"}) {
    Attribute a;
    a.name = name;
    a.kind = AttrKind::kGraph;
    a.g = std::make_unique<Graph>(&g);
    Node* r = a.g->add_node(std::string(name) == "then_branch" ? "Relu" : "Neg", {x}, {std::string(name) + "_y"});
    a.g->add_output(r->output(0));
    n->set_attr(std::move(a));
  }
  n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2})));
  g.add_output(n->output(0));
  const Model c = copy_model(m);
  EXPECT_TRUE(serialize_model(c) == serialize_model(m)) << structural_diff(m, c);
  ASSERT_EQ(c.graph->num_nodes(), 1u);
  EXPECT_EQ((*c.graph->nodes().begin())->subgraphs().size(), 2u);
}

}  // namespace
}  // namespace amp
