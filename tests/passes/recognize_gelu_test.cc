// recognize-gelu on GELU as PyTorch exports it (tests/passes/gelu_exports.py): nn.GELU() exact and
// tanh, GPT-2's gelu_new with Pow, other groupings of the 0.5; and spellings it must leave alone.
// A recognised model must compute what PyTorch computed, pass ONNX's checker after a save, and keep
// its output's name; the shipped gpt's training step must carry Gelu and GeluGrad, not Erf.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "frontends/lib/npz.h"
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/training/training_step.h"
#include "tests/support/graph_counts.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

using test::count_op;

class RecognizeGelu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("gelu_exports"));
    std::string out;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/passes/gelu_exports.py " + *dir_, &out), 0) << out;
  }
  static Model load(const std::string& name) { return load_model(*dir_ + "/" + name + ".onnx"); }

  // Runs m on the export's input; returns the largest |ours - PyTorch's| relative to max(1, |y|).
  static double error_vs_torch(const Model& m, const std::string& name) {
    Tensor x, y;
    for (auto& [key, t] : read_npz(*dir_ + "/" + name + ".npz")) (key == "x" ? x : y) = std::move(t);
    auto out = make_backend("cpu")->compile(m, {})->run({{"x", x}}, {"y"});
    double worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      worst = std::max(worst, std::fabs(out[0].element(i) - y.element(i)) / std::max(1.0, std::fabs(y.element(i))));
    return worst;
  }

  static std::string* dir_;
};
std::string* RecognizeGelu::dir_ = nullptr;

TEST_F(RecognizeGelu, PyTorchsSpellingsBecomeOneGeluThatComputesWhatPyTorchComputed) {
  const struct {
    const char* name;
    const char* approximate;
  } cases[] = {{"exact_nn_gelu", "none"},
               {"tanh_nn_gelu", "tanh"},
               {"tanh_gelu_new", "tanh"},
               {"exact_mul_half_last", "none"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Model m = load(c.name);
    const size_t nodes_before = m.graph->num_nodes();
    RecognizeGeluPass pass;
    ASSERT_TRUE(pass.run(m));
    ASSERT_EQ(count_op(*m.graph, "Gelu"), 1u);
    EXPECT_EQ(count_op(*m.graph, "Erf") + count_op(*m.graph, "Tanh") + count_op(*m.graph, "Pow"), 0u);
    EXPECT_EQ(count_op(*m.graph, "Constant"), 0u) << "the chain's constants are left unread";
    EXPECT_LT(m.graph->num_nodes(), nodes_before);
    for (const Node* n : m.graph->nodes())
      if (n->op_type() == "Gelu") {
        EXPECT_EQ(n->domain(), kAmpDomain);
        EXPECT_EQ(n->attr_string("approximate", ""), c.approximate);
      }
    EXPECT_EQ(m.graph->outputs().at(0)->name(), "y");
    EXPECT_EQ(verify(m), std::vector<std::string>{});
    // One rounding instead of one per node: within a few float32 ulps of PyTorch's own GELU.
    EXPECT_LT(error_vs_torch(m, c.name), 2e-6);
    const std::string saved = *dir_ + "/" + c.name + ".recognised.onnx";
    save_model(m, saved);
    Model again = load_model(saved);  // ONNX's checker, with the ai.onnx_amp schemas
    EXPECT_EQ(count_op(*again.graph, "Gelu"), 1u);
    EXPECT_LT(error_vs_torch(again, c.name), 2e-6);
  }
}

TEST_F(RecognizeGelu, OtherConstantsAndSharedIntermediatesAreLeftAlone) {
  for (const char* name : {"not_gelu_constant", "not_gelu_shared_erf"}) {
    SCOPED_TRACE(name);
    Model m = load(name);
    const size_t nodes_before = m.graph->num_nodes();
    RecognizeGeluPass pass;
    EXPECT_FALSE(pass.run(m));
    EXPECT_EQ(m.graph->num_nodes(), nodes_before);
    EXPECT_EQ(count_op(*m.graph, "Gelu"), 0u);
    EXPECT_LT(error_vs_torch(m, name), 2e-6);
  }
}

TEST_F(RecognizeGelu, GptsTrainingStepDifferentiatesGeluAsOneOp) {
  TrainingSpec spec;
  spec.loss.kind = LossKind::kCrossEntropy;
  spec.precision = DType::kFloat16;
  spec.loss_scale.mode = LossScaleSpec::Mode::kDynamic;
  TrainingStep step = build_training_step(load_model(test::source_dir() + "/models/gpt.train.onnx"), spec);
  const Graph& g = *step.model.graph;
  EXPECT_EQ(count_op(g, "Gelu"), 2u);  // one per block's MLP
  EXPECT_EQ(count_op(g, "GeluGrad"), 2u);
  EXPECT_EQ(count_op(g, "Erf"), 0u);
  for (const Node* n : g.nodes())
    if (n->op_type() == "Gelu" || n->op_type() == "GeluGrad") {
      EXPECT_EQ(n->output(0)->dtype(), DType::kFloat16) << n->label() << ": GELU runs in the precision of the products around it";
      EXPECT_EQ(n->attr_string("approximate", ""), "none");
    }
}

}  // namespace
}  // namespace amp
