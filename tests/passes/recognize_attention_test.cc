// recognize-attention on attention as PyTorch 1.13 exports it (tests/passes/attention_exports.py):
// hand-written GPT blocks (a sliced triu buffer with masked_fill, a constant -inf bias, the scale
// on the scores, on Q, on K, on both, Dropout in eval and at ratio 0 in training), a computed bool
// mask, nn.MultiheadAttention without a mask, with a key padding mask and with
// generate_square_subsequent_mask, nn.TransformerEncoder with a key padding mask and
// nn.TransformerDecoder (causal self-attention and cross-attention); ONNX's own Attention (opset
// 23, lowered on import: causal, grouped key/value heads, 4-D with a scale); and near-misses it must
// leave alone. Each recognised model must compute what the unfused export computes — in fp32
// within 1e-6 of it and within 1e-5 of PyTorch, and in fp16 and bf16 (amp-rewrite's colouring of
// both) against the unfused 16-bit run — pass ONNX's checker after a save and keep its outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "frontends/lib/npz.h"
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"
#include "passes/fusion/recognize_attention.h"
#include "passes/pipelines.h"
#include "tests/support/graph_counts.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

struct Expected {
  std::string name;
  int nodes = 0, causal = 0, masked = 0;
};

class RecognizeAttention : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("attention_exports"));
    std::string out;
    ASSERT_EQ(test::run_python(test::source_dir() + "/tests/passes/attention_exports.py " + *dir_, &out), 0) << out;
    expected_ = new std::vector<Expected>;
    std::ifstream f(*dir_ + "/expected.txt");
    for (Expected e; f >> e.name >> e.nodes >> e.causal >> e.masked;) expected_->push_back(e);
  }
  static Model load(const std::string& name) { return load_model(*dir_ + "/" + name + ".onnx"); }
  static std::map<std::string, Tensor> arrays(const std::string& name) {
    std::map<std::string, Tensor> a;
    for (auto& [key, t] : read_npz(*dir_ + "/" + name + ".npz")) a[key] = std::move(t);
    return a;
  }
  // m's output "y" on the export's inputs.
  static Tensor run(const Model& m, const std::string& name) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (auto& [key, t] : arrays(name))  // an export drops the inputs its graph does not read
      for (const Value* in : m.graph->inputs())
        if (in->name() == key) feeds.emplace_back(key, t);
    return make_backend("cpu")->compile(m, {})->run(feeds, {"y"}).at(0);
  }
  // max |a - b| / max |b|, over elements in float64.
  static double distance(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.dims, b.dims);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < b.numel(); ++i) {
      worst = std::max(worst, std::fabs(a.element(i) - b.element(i)));
      scale = std::max(scale, std::fabs(b.element(i)));
    }
    return worst / scale;
  }
  static int attention_nodes(const Model& m, int* causal, int* masked) {
    int n = 0;
    *causal = *masked = 0;
    for (const Node* node : m.graph->nodes())
      if (node->domain() == kAmpDomain && node->op_type() == "Attention") {
        ++n;
        *causal += node->attr_int("is_causal", 0) != 0;
        *masked += node->inputs().size() > 3 && node->input(3);
      }
    return n;
  }
  // The model rewritten to `t` by amp-rewrite's pipeline, after recognize-attention when `fuse`.
  static Model low_precision(const std::string& name, DType t, bool fuse) {
    Model m = load(name);
    if (fuse) RecognizeAttentionPass().run(m);
    AmpResult result;
    amp_rewrite_pipeline(AmpPolicy(t), result, /*verify_each=*/true).run(m);
    return m;
  }

  static std::string* dir_;
  static std::vector<Expected>* expected_;
};
std::string* RecognizeAttention::dir_ = nullptr;
std::vector<Expected>* RecognizeAttention::expected_ = nullptr;

TEST_F(RecognizeAttention, PyTorchsAttentionBecomesOneNodePerAttentionThatComputesTheSame) {
  ASSERT_EQ(expected_->size(), 24u);
  for (const Expected& e : *expected_) {
    if (e.nodes == 0) continue;
    SCOPED_TRACE(e.name);
    Model m = load(e.name);
    const Tensor unfused = run(m, e.name);
    const size_t softmaxes = test::count_op(*m.graph, "Softmax");
    RecognizeAttentionPass pass;
    ASSERT_TRUE(pass.run(m));
    EXPECT_EQ(pass.stats().at("attentions recognised"), e.nodes);
    int causal = 0, masked = 0;
    EXPECT_EQ(attention_nodes(m, &causal, &masked), e.nodes);
    EXPECT_EQ(causal, e.causal);
    EXPECT_EQ(masked, e.masked);
    EXPECT_EQ(test::count_op(*m.graph, "Softmax"), softmaxes - static_cast<size_t>(e.nodes));
    if (e.causal == e.nodes) {  // the causal masks' computation went with them
      EXPECT_EQ(test::count_op(*m.graph, "Where"), 0u);
      EXPECT_EQ(test::count_op(*m.graph, "Trilu"), 0u);
    }
    EXPECT_EQ(m.graph->outputs().at(0)->name(), "y");
    EXPECT_EQ(verify(m), std::vector<std::string>{});
    const Tensor fused = run(m, e.name);
    EXPECT_LE(distance(fused, unfused), 1e-6);
    EXPECT_LE(distance(fused, arrays(e.name).at("y")), 1e-5);
    const std::string saved = *dir_ + "/" + e.name + ".recognised.onnx";
    save_model(m, saved);
    Model again = load_model(saved);  // ONNX's checker and shape inference
    EXPECT_EQ(attention_nodes(again, &causal, &masked), e.nodes);
    EXPECT_LE(distance(run(again, e.name), unfused), 1e-6);
  }
}

TEST_F(RecognizeAttention, NearMissesAreLeftAlone) {
  int near_misses = 0;
  for (const Expected& e : *expected_) {
    if (e.nodes != 0) continue;
    SCOPED_TRACE(e.name);
    ++near_misses;
    Model m = load(e.name);
    const size_t nodes_before = m.graph->num_nodes();
    EXPECT_FALSE(RecognizeAttentionPass().run(m));
    EXPECT_EQ(m.graph->num_nodes(), nodes_before);
  }
  EXPECT_EQ(near_misses, 6);
}

// In fp16 and bf16 the fused node against the unfused chain as amp-rewrite colours it (products
// in the 16-bit type, the Softmax in fp32): both round differently — the unfused run rounds the
// scores and the probabilities to 16 bits, the fused one only the probabilities — so they agree to
// a few units of the type's last place, not bit for bit.
TEST_F(RecognizeAttention, SixteenBitRunsAgreeWithTheUnfusedSixteenBitRun) {
  const std::pair<DType, double> types[] = {{DType::kFloat16, 2e-3}, {DType::kBFloat16, 1.5e-2}};
  for (const char* name : {"gpt_causal_long", "mha_key_padding", "encoder_key_padding", "decoder_causal"})
    for (const auto& [t, bound] : types) {
      SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(t)));
      const Model unfused = low_precision(name, t, false);
      const Model fused = low_precision(name, t, true);
      int causal = 0, masked = 0;
      ASSERT_GE(attention_nodes(fused, &causal, &masked), 1);
      for (const Node* n : fused.graph->nodes())
        if (n->op_type() == "Attention") {
          EXPECT_EQ(n->input(0)->dtype(), t);
        }
      const Tensor a = run(fused, name), b = run(unfused, name);
      const double d = distance(a, b);
      std::printf("%s %s: fused vs unfused %.3g (max |diff| / max |unfused|)\n", name, std::string(dtype_name(t)).c_str(), d);
      EXPECT_LE(d, bound);
      EXPECT_GT(distance(b, arrays(name).at("y")), 0.0) << "the 16-bit run rounds";
    }
}

}  // namespace
}  // namespace amp
