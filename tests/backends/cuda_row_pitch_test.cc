// Padded rows (backends/cuda/row_pitch.h), decided without a device: a language-model head's
// scores with an odd vocabulary, and their gradient, are stored with rows a multiple of 16 bytes
// apart exactly where the unit writing them and every unit reading them takes them so (the head's
// products, the loss, its gradient, the accuracy's ArgMax), and nowhere else: aligned rows, a
// fetched value, AMP_CUDA_STAGED_ROWS=1. The buffers and the traffic count the padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#if AMP_HAVE_CUDA
#include "backends/cuda/device_layout.h"
#include "backends/cuda/row_pitch.h"
#include "backends/cuda/schedule.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/lm_head_model.h"
#include "tests/support/scoped_env.h"
#endif

namespace amp::cuda {
namespace {

#if !AMP_HAVE_CUDA
TEST(CudaRowPitch, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA (nvcc not found)"; }
#else

// The step's plan at N = 2, T = 8 with the loss, the correct count and the state updates as
// targets (what amp-train fetches), plus `more`.
ShapePlan plan_step(const Schedule& s, const TrainingStep& step, std::vector<Tensor>& feeds,
                    const std::vector<std::string>& more = {}) {
  feeds = test::zero_feeds(s);
  std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
  for (const Tensor& t : feeds) fed[s.program.find(t.name)] = &t;
  std::vector<TensorDesc> state;
  for (int v : s.state_values) {
    const Tensor& t = s.program.initializers[s.program.values[v].initializer];
    state.push_back(TensorDesc{t.dtype, t.dims});
  }
  std::vector<int> targets = {s.program.find(step.loss), s.program.find(step.correct)};
  for (const std::string& name : more) targets.push_back(s.program.find(name));
  for (const auto& [st, v] : s.updates) targets.push_back(v);
  return s.plan(fed, state, targets);
}

struct PaddedUse {
  std::string kind;
  bool output;
};

// Per padded root, the units writing or reading it or one of its views.
std::vector<std::vector<PaddedUse>> padded_uses(const ShapePlan& p, const std::vector<int>& roots) {
  std::vector<std::vector<PaddedUse>> uses(roots.size());
  for (size_t r = 0; r < roots.size(); ++r)
    for (const Unit* u : p.order) {
      for (size_t i = 0; i < u->in.size(); ++i)
        if (u->in[i] >= 0 && p.root(u->in[i]) == roots[r] && !u->host_only[i]) {
          EXPECT_TRUE(u->op->takes_row_pitch(unit_shapes(p, *u), false, i)) << u->kind;
          uses[r].push_back({u->kind, false});
        }
      for (size_t k = 0; k < u->out.size(); ++k)
        if (u->out[k] >= 0 && p.root(u->out[k]) == roots[r]) {
          EXPECT_TRUE(u->op->takes_row_pitch(unit_shapes(p, *u), true, k)) << u->kind;
          uses[r].push_back({u->kind, true});
        }
    }
  return uses;
}

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

TEST(CudaRowPitch, OddScoreRowsAndTheirGradientAreStoredPaddedBetweenTheUnitsThatTakeThem) {
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    const TrainingStep step = test::mixed_precision_step(test::lm_head_model(37, 16), precision);
    ASSERT_FALSE(step.correct.empty());
    const Schedule s(step.model, test::step_options(step));
    std::vector<Tensor> feeds;
    const ShapePlan p = plan_step(s, step, feeds);
    const std::vector<int> roots = padded_row_values(p);
    ASSERT_EQ(roots.size(), 2u) << "the scores and their gradient";
    const std::vector<std::vector<PaddedUse>> uses = padded_uses(p, roots);
    std::set<std::string> writers, readers;
    for (size_t r = 0; r < roots.size(); ++r) {
      const TensorDesc& d = p.desc[roots[r]];
      const DType scores_type = precision == DType::kFloat ? DType::kFloat : precision;
      EXPECT_EQ(d.dtype, scores_type) << s.program.values[roots[r]].name;
      EXPECT_EQ(d.dims.back(), 37);
      EXPECT_EQ(d.row_pitch, 40) << "37 elements round up to 16 bytes: 8 of 16 bits, 4 of fp32";
      EXPECT_EQ(d.nbytes(), static_cast<size_t>(d.numel() / 37 * 40) * dtype_size(d.dtype));
      // Its views are padded alike.
      for (size_t v = 0; v < p.desc.size(); ++v)
        if (p.alias_of[v] == roots[r]) EXPECT_EQ(p.desc[v].row_pitch, 40) << s.program.values[v].name;
      int writes = 0;
      for (const PaddedUse& u : uses[r]) {
        (u.output ? writers : readers).insert(u.kind);
        writes += u.output;
        EXPECT_TRUE(starts(u.kind, "MatMul") || starts(u.kind, "SoftmaxCrossEntropyLoss") || starts(u.kind, "ArgMax"))
            << u.kind << " touches padded rows";
      }
      EXPECT_EQ(writes, 1);
    }
    // The head's forward product writes the scores, the loss's gradient their gradient; the loss,
    // its gradient and ArgMax read the scores, both backward products their gradient.
    EXPECT_EQ(writers.size(), 2u);
    EXPECT_TRUE(std::any_of(writers.begin(), writers.end(), [](const std::string& k) { return starts(k, "MatMul"); }));
    EXPECT_TRUE(std::any_of(writers.begin(), writers.end(),
                            [](const std::string& k) { return starts(k, "SoftmaxCrossEntropyLossGrad"); }));
    int products = 0, argmax = 0, losses = 0;
    for (const std::vector<PaddedUse>& list : uses)
      for (const PaddedUse& u : list)
        if (!u.output) {
          products += starts(u.kind, "MatMul");
          argmax += u.kind.find("ArgMax") != std::string::npos;  // merged into the loss (loss_argmax_fusion.h)
          losses += starts(u.kind, "SoftmaxCrossEntropyLoss");
        }
    EXPECT_GE(products, 2) << "the input and the weight gradients' products read the padded gradient";
    EXPECT_EQ(argmax, 1);
    EXPECT_EQ(losses, 2) << "the loss (with the accuracy's ArgMax) and its gradient read the padded scores";
    // Laid out with their padding.
    const DeviceLayout layout = layout_device_memory(s, p, std::vector<const Tensor*>(p.desc.size(), nullptr), {}, 256);
    for (int r : roots) EXPECT_GE(layout.offset[r], 0);
  }
}

TEST(CudaRowPitch, AlignedRowsFetchedScoresAndTheSwitchKeepRowsTogether) {
  std::vector<Tensor> feeds;
  {
    SCOPED_TRACE("40 columns: 80 bytes of bf16 rows, a multiple of 16");
    const TrainingStep step = test::mixed_precision_step(test::lm_head_model(40, 16), DType::kBFloat16);
    const Schedule s(step.model, test::step_options(step));
    EXPECT_TRUE(padded_row_values(plan_step(s, step, feeds)).empty());
  }
  const TrainingStep step = test::mixed_precision_step(test::lm_head_model(37, 16), DType::kBFloat16);
  const Schedule s(step.model, test::step_options(step));
  {
    SCOPED_TRACE("the scores fetched: they are copied out as they are; their gradient still pads");
    std::string scores;
    for (const Node* n : step.model.graph->nodes())
      if (n->op_type() == "SoftmaxCrossEntropyLoss") scores = n->input(0)->name();
    ASSERT_FALSE(scores.empty());
    // The loss reads the 16-bit scores through a widening Cast it absorbs: fetch those.
    const Node* cast = step.model.graph->value(scores)->producer();
    ASSERT_TRUE(cast && cast->op_type() == "Cast");
    const std::string low = cast->input(0)->name();
    const ShapePlan p = plan_step(s, step, feeds, {low});
    const std::vector<int> roots = padded_row_values(p);
    ASSERT_EQ(roots.size(), 1u);
    EXPECT_NE(p.root(s.program.find(low)), roots[0]);
    EXPECT_EQ(p.desc[s.program.find(low)].row_pitch, 0);
  }
  {
    SCOPED_TRACE("AMP_CUDA_STAGED_ROWS=1");
    test::ScopedEnv staged("AMP_CUDA_STAGED_ROWS", "1");
    const ShapePlan p = plan_step(s, step, feeds);
    EXPECT_TRUE(padded_row_values(p).empty());
    for (const TensorDesc& d : p.desc) EXPECT_EQ(d.row_pitch, 0);
  }
}

TEST(CudaRowPitch, ScoresAnElementwiseKernelReadsStayTogether) {
  // A model that squares its scores before the loss: the elementwise kernel indexes them densely,
  // so they keep their rows together; the loss's gradient pads only where its readers take it.
  Model m = test::lm_head_model(37, 16);
  Graph& g = *m.graph;
  Value* logits = g.outputs().at(0);
  Node* sq = g.add_node("Mul", {logits, logits}, {"squared"});
  sq->output(0)->set_type(logits->type());
  g.set_output(0, sq->output(0));
  const TrainingStep step = test::mixed_precision_step(std::move(m), DType::kBFloat16);
  const Schedule s(step.model, test::step_options(step));
  std::vector<Tensor> feeds;
  const ShapePlan p = plan_step(s, step, feeds);
  int fused_reads = 0;
  for (const Unit* u : p.order) {
    if (!starts(u->kind, "fused")) continue;
    for (int v : u->in)
      if (v >= 0 && !p.desc[v].dims.empty() && p.desc[v].dims.back() == 37) {
        ++fused_reads;
        EXPECT_EQ(p.desc[v].row_pitch, 0) << u->kind << " reads " << s.program.values[v].name;
      }
  }
  EXPECT_GT(fused_reads, 0) << "the square and its gradient read rows of scores";
  padded_uses(p, padded_row_values(p));  // whatever is padded, its units take it so
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp::cuda
