// What save_model writes is valid ONNX by onnx's own Python package (onnx.load +
// check_model(full_check=True)), for the sample models, for old testdata models converted to opset
// 17, and for a model with training_info, which also comes back whole.
#include <gtest/gtest.h>

#include "graph/onnx_io.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

std::string python_check(const std::string& path, const std::string& extra = "") {
  std::string output;
  int rc = test::run_python(test::source_dir() + "/tests/graph/check_exported_model.py " + path + " " + extra, &output);
  return rc == 0 ? "" : output;
}

TEST(OnnxExport, SampleAndConvertedModelsPassPythonFullCheck) {
  const std::string dir = test::temp_dir("export_python");
  const std::vector<std::string> sources = {
      test::source_dir() + "/models/gpt.onnx",
      test::source_dir() + "/models/cnn.train.onnx",
      test::testdata_dir() + "/pytorch-operator/test_operator_addmm/model.onnx",  // opset 6 -> 17
      test::testdata_dir() + "/node/test_loop13_seq/model.onnx",                 // sequences in a Loop
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    Model m = load_model(sources[i]);
    ASSERT_EQ(m.opset_version(""), 17) << sources[i];
    const std::string path = dir + "/m" + std::to_string(i) + ".onnx";
    save_model(m, path);
    EXPECT_EQ(python_check(path), "") << sources[i];
  }
}

// A training step in ONNX's own format: the algorithm graph reads the main graph's weight and
// its output is bound back to it; the initialization graph sets the weight.
Model make_training_model() {
  Model m;
  m.set_opset_version("", 17);
  Graph& g = *m.graph;
  g.name = "main";
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2})));
  Tensor w(DType::kFloat, {2});
  w.name = "w";
  w.mutable_as<float>()[0] = 1;
  w.mutable_as<float>()[1] = -1;
  Value* wv = g.add_initializer(std::move(w));
  Node* mul = g.add_node("Mul", {x, wv}, {"y"});
  mul->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2})));
  g.add_output(mul->output(0));

  TrainingInfo t;
  t.algorithm = std::make_unique<Graph>(&g);
  Graph& step = *t.algorithm;
  step.name = "step";
  Tensor decay(DType::kFloat, {1});
  decay.name = "decay";
  decay.mutable_as<float>()[0] = 0.5f;
  Value* dv = step.add_initializer(std::move(decay));
  Node* update = step.add_node("Mul", {wv, dv}, {"w_new"});
  update->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2})));
  step.add_output(update->output(0));
  t.update_binding.emplace_back("w", "w_new");

  t.initialization = std::make_unique<Graph>(&g);
  Graph& init = *t.initialization;
  init.name = "init";
  Tensor ones(DType::kFloat, {2});
  ones.mutable_as<float>()[0] = ones.mutable_as<float>()[1] = 1;
  Node* constant = init.add_node("Constant", {}, {"w_init"});
  constant->set_attr(Attribute::of_tensor("value", std::move(ones)));
  constant->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2})));
  init.add_output(constant->output(0));
  t.initialization_binding.emplace_back("w", "w_init");
  m.training_info.push_back(std::move(t));
  return m;
}

TEST(OnnxExport, TrainingInfoRoundTrips) {
  const std::string path = test::temp_dir("export_training") + "/train.onnx";
  Model original = make_training_model();
  save_model(original, path);
  EXPECT_EQ(python_check(path, "--training-info=1"), "");
  LoadOptions as_saved;
  as_saved.target_opset = 0;
  as_saved.infer_shapes = false;
  Model loaded = load_model(path, as_saved);
  EXPECT_EQ(structural_diff(original, loaded), "");
  // The step graph reads the main graph's weight through the scope chain.
  ASSERT_EQ(loaded.training_info.size(), 1u);
  const Graph& step = *loaded.training_info[0].algorithm;
  EXPECT_EQ(step.parent(), loaded.graph.get());
  EXPECT_EQ((*step.nodes().begin())->input(0), loaded.graph->value("w"));
}

TEST(OnnxExport, StructuralDiffNamesTheFirstDifference) {
  Model a = make_training_model();
  Model b = make_training_model();
  EXPECT_EQ(structural_diff(a, b), "");
  b.training_info[0].algorithm->value("decay")->mutable_initializer().mutable_as<float>()[0] = 0.25f;
  EXPECT_NE(structural_diff(a, b).find("initializer 'decay': contents differ"), std::string::npos)
      << structural_diff(a, b);
  Model c = make_training_model();
  (*c.graph->nodes().begin())->set_attr(Attribute::of_int("extra", 1));
  EXPECT_NE(structural_diff(a, c).find("attribute count"), std::string::npos) << structural_diff(a, c);
  Model d = make_training_model();
  d.set_metadata("k", "v");
  EXPECT_NE(structural_diff(a, d).find("metadata_props"), std::string::npos) << structural_diff(a, d);
}

}  // namespace
}  // namespace amp
