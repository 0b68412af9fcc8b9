// recognize-layer-norm on LayerNorm as PyTorch exports it before opset 17
// (tests/passes/layer_norm_exports.py): nn.LayerNorm at opsets 11, 13, 14 (every dim symbolic) and
// 16, the same chain by hand, BERT's with x - mean computed twice (PyTorch 1.1); and chains it must leave alone (another axis, another exponent, the variance read
// elsewhere). A recognised model must compute what PyTorch computed, pass ONNX's checker after a
// save and keep its output's name.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "frontends/lib/npz.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "tests/support/graph_counts.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using test::count_op;

class RecognizeLayerNorm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("layer_norm_exports"));
    std::string out;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/passes/layer_norm_exports.py " + *dir_, &out), 0) << out;
  }
  static Model load(const std::string& name) { return load_model(*dir_ + "/" + name + ".onnx"); }

  // Runs m on the export's input; returns the largest |ours - PyTorch's| relative to max(1, |y|).
  static double error_vs_torch(const Model& m, const std::string& name) {
    Tensor x, y;
    for (auto& [key, t] : read_npz(*dir_ + "/" + name + ".npz")) (key == "x" ? x : y) = std::move(t);
    auto out = make_backend("cpu")->compile(m, {})->run({{"x", x}}, {"y"});
    EXPECT_EQ(out[0].dims, y.dims);
    double worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      worst = std::max(worst, std::fabs(out[0].element(i) - y.element(i)) / std::max(1.0, std::fabs(y.element(i))));
    return worst;
  }

  static std::string* dir_;
};
std::string* RecognizeLayerNorm::dir_ = nullptr;

TEST_F(RecognizeLayerNorm, PyTorchsDecomposedLayerNormBecomesOneLayerNormalization) {
  const struct {
    const char* name;
    float epsilon;
  } cases[] = {{"nn_layer_norm", 1e-5f}, {"nn_layer_norm_rank3", 1e-5f}, {"nn_layer_norm_eps", 1e-6f},
               {"nn_layer_norm_dynamic", 1e-5f}, {"manual_last_axis", 1e-5f}, {"bert_two_subs", 1e-12f}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Model m = load(c.name);
    ASSERT_EQ(m.opset_version(""), 17) << "load_model upgrades the export to opset 17";
    ASSERT_EQ(count_op(*m.graph, "LayerNormalization"), 0u);
    RecognizeLayerNormPass pass;
    ASSERT_TRUE(pass.run(m));
    EXPECT_EQ(pass.stats().at("decomposed LayerNorms recognised"), 1);
    ASSERT_EQ(count_op(*m.graph, "LayerNormalization"), 1u);
    for (const char* op : {"ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "Add", "Constant"})
      EXPECT_EQ(count_op(*m.graph, op), 0u) << op;
    for (const Node* n : m.graph->nodes())
      if (n->op_type() == "LayerNormalization") {
        EXPECT_EQ(n->domain(), "");
        EXPECT_EQ(n->attr_int("axis", 0), -1);
        EXPECT_EQ(n->attr_float("epsilon", 0), c.epsilon);
        EXPECT_EQ(n->outputs().size(), 1u);
      }
    EXPECT_EQ(m.graph->outputs().at(0)->name(), "y");
    EXPECT_EQ(verify(m), std::vector<std::string>{});
    EXPECT_LT(error_vs_torch(m, c.name), 1e-5);
    const std::string saved = *dir_ + "/" + c.name + ".recognised.onnx";
    save_model(m, saved);
    Model again = load_model(saved);  // ONNX's checker
    EXPECT_EQ(count_op(*again.graph, "LayerNormalization"), 1u);
    EXPECT_LT(error_vs_torch(again, c.name), 1e-5);
  }
}

TEST_F(RecognizeLayerNorm, WeightsSharedThroughIdentityAreRecognised) {
  Model m = load("two_fresh_layer_norms");
  ASSERT_GE(count_op(*m.graph, "Identity"), 1u) << "the export shares the second LayerNorm's weights";
  RecognizeLayerNormPass pass;
  ASSERT_TRUE(pass.run(m));
  EXPECT_EQ(pass.stats().at("decomposed LayerNorms recognised"), 2);
  EXPECT_EQ(count_op(*m.graph, "LayerNormalization"), 2u);
  EXPECT_EQ(count_op(*m.graph, "ReduceMean"), 0u);
  EXPECT_EQ(verify(m), std::vector<std::string>{});
  EXPECT_LT(error_vs_torch(m, "two_fresh_layer_norms"), 1e-5);
}

TEST_F(RecognizeLayerNorm, TwoInOneScopeGetDistinctNodeNames) {
  Model m = load("twice_in_one_scope");
  RecognizeLayerNormPass pass;
  ASSERT_TRUE(pass.run(m));
  std::vector<std::string> names;
  for (const Node* n : m.graph->nodes())
    if (n->op_type() == "LayerNormalization") names.push_back(n->name);
  EXPECT_EQ(names, (std::vector<std::string>{"/LayerNormalization", "/LayerNormalization_1"}));
  EXPECT_LT(error_vs_torch(m, "twice_in_one_scope"), 1e-5);
}

TEST_F(RecognizeLayerNorm, OtherAxisOtherExponentAndSharedIntermediatesAreLeftAlone) {
  for (const char* name : {"not_ln_other_axis", "not_ln_exponent", "not_ln_shared_variance"}) {
    SCOPED_TRACE(name);
    Model m = load(name);
    const size_t nodes_before = m.graph->num_nodes();
    RecognizeLayerNormPass pass;
    EXPECT_FALSE(pass.run(m));
    EXPECT_EQ(m.graph->num_nodes(), nodes_before);
    EXPECT_EQ(count_op(*m.graph, "LayerNormalization"), 0u);
    EXPECT_LT(error_vs_torch(m, name), 1e-5);
  }
}

TEST_F(RecognizeLayerNorm, ModelsBeforeOpset17AreLeftAlone) {
  LoadOptions options;
  options.target_opset = 0;  // the export's own opset 13: no LayerNormalization yet
  Model m = load_model(*dir_ + "/nn_layer_norm.onnx", options);
  ASSERT_EQ(m.opset_version(""), 13);
  const size_t nodes_before = m.graph->num_nodes();
  EXPECT_FALSE(RecognizeLayerNormPass().run(m));
  EXPECT_EQ(m.graph->num_nodes(), nodes_before);
}

}  // namespace
}  // namespace amp
