// The accuracy's ArgMax found in the loss's pass over the scores (backends/cuda/loss_argmax_fusion.h):
// a model computing SoftmaxCrossEntropyLoss and ArgMax over the last axis of the same [N, C] scores
// runs them as one unit, whose loss and indices are the CPU backend's (the reference) — ties to the
// first index (the last with select_last_index), a row with a NaN pointing at its first NaN — in
// fp32, fp16 and bf16, over rows of 37 (odd: the scores stored with padded rows when a product
// writes them, row_pitch.h) and of 3000 classes, twice (the second run replays a captured graph).
// An ArgMax over another axis stays a unit of its own. Without a GPU these run in
// test_cuda_backend_emulated and skip in test_backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/schedule.h"
#include "tests/support/device_report_file.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::expect_close;

// scores [rows, classes] (a graph input, or a product's result: x [rows, 8] times w [8, classes])
// -> SoftmaxCrossEntropyLoss(scores, labels) -> loss, and ArgMax(scores, axis) -> indices.
Model loss_and_argmax(DType t, int64_t rows, int64_t classes, bool from_product, int64_t axis, bool last) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* scores = nullptr;
  if (from_product) {
    Value* x = g.add_input("x", ValueType::tensor(t, Shape::of({rows, 8})));
    Value* w = g.add_input("w", ValueType::tensor(t, Shape::of({8, classes})));
    Node* mm = g.add_node("MatMul", {x, w}, {"scores"});
    mm->output(0)->set_type(ValueType::tensor(t, Shape::of({rows, classes})));
    scores = mm->output(0);
  } else {
    scores = g.add_input("scores", ValueType::tensor(t, Shape::of({rows, classes})));
  }
  Value* labels = g.add_input("labels", ValueType::tensor(DType::kInt64, Shape::of({rows})));
  Node* loss = g.add_node("SoftmaxCrossEntropyLoss", {scores, labels}, {"loss"});
  loss->set_attr(Attribute::of_string("reduction", "none"));  // per row: one row's NaN spoils no other
  loss->output(0)->set_type(ValueType::tensor(t, Shape::of({rows})));
  Node* am = g.add_node("ArgMax", {scores}, {"indices"});
  am->set_attr(Attribute::of_int("axis", axis));
  am->set_attr(Attribute::of_int("keepdims", 0));
  am->set_attr(Attribute::of_int("select_last_index", last ? 1 : 0));
  am->output(0)->set_type(ValueType::tensor(DType::kInt64));
  g.add_output(loss->output(0));
  g.add_output(am->output(0));
  return m;
}

// Scores from a few levels (ties in every row), row 1 with two NaNs.
Tensor tied_scores(DType t, int64_t rows, int64_t classes, uint32_t seed) {
  Tensor x(t, {rows, classes});
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-3, 3);
  for (int64_t k = 0; k < x.numel(); ++k) test::put_float(x, k, 0.5f * static_cast<float>(level(rng)));
  if (rows > 1) {
    test::put_float(x, classes + classes / 3, std::numeric_limits<float>::quiet_NaN());
    test::put_float(x, classes + classes / 2, std::numeric_limits<float>::quiet_NaN());
  }
  return x;
}

TEST(CudaBackendGpu, TheLossFindsTheAccuracysArgMaxInItsPassOverTheScores) {
  REQUIRE_GPU();
  constexpr int64_t kRows = 6;
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (int64_t classes : {int64_t{37}, int64_t{3000}})
      for (bool from_product : {false, true})
        for (bool last : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + ", " + std::to_string(classes) + " classes" +
                       (from_product ? ", a product's scores" : ", fed scores") + (last ? ", select_last_index" : ""));
          const Model m = loss_and_argmax(t, kRows, classes, from_product, -1, last);
          std::vector<std::pair<std::string, Tensor>> feeds = {
              {"labels", test::random_tensor(DType::kInt64, {kRows}, 5, 0, static_cast<float>(classes))}};
          if (from_product) {
            // Products of levels: ties survive the sums exactly.
            feeds.push_back({"x", tied_scores(t, kRows, 8, 6)});
            feeds.push_back({"w", tied_scores(t, 8, classes, 7)});
          } else {
            feeds.push_back({"scores", tied_scores(t, kRows, classes, 8)});
          }
          auto cpu = make_backend("cpu")->compile(m, {});
          auto gpu = make_backend("cuda")->compile(m, {});
          const std::vector<Tensor> want = cpu->run(feeds, {"loss", "indices"});
          for (int run = 0; run < 2; ++run) {
            const std::vector<Tensor> got = gpu->run(feeds, {"loss", "indices"});
            expect_close(got[0], want[0], "loss, run " + std::to_string(run));
            expect_close(got[1], want[1], "indices, run " + std::to_string(run));  // integers: exactly
          }
          if (!from_product) {
            EXPECT_TRUE(std::isnan(want[0].element(1))) << "row 1 has NaNs";
            EXPECT_FALSE(std::isnan(want[0].element(0)));
          }
        }
}

TEST(CudaSchedule, TheLossTakesAnArgMaxOverItsScoresClassesOnly) {
  auto kinds = [](DType t, int64_t axis) {
    const Model m = loss_and_argmax(t, 6, 37, true, axis, false);
    const cuda::Schedule s(m, {});
    std::vector<Tensor> feeds = {Tensor(t, {6, 8}), Tensor(t, {8, 37}), Tensor(DType::kInt64, {6})};
    feeds[0].name = "x";
    feeds[1].name = "w";
    feeds[2].name = "labels";
    std::vector<const Tensor*> fed(s.program.values.size(), nullptr);
    for (const Tensor& f : feeds) fed[s.program.find(f.name)] = &f;
    const cuda::ShapePlan p = s.plan(fed, {}, {s.program.find("loss"), s.program.find("indices")});
    std::vector<std::string> out;
    for (const cuda::Unit* u : p.order) out.push_back(u->kind);
    return out;
  };
  for (DType t : {DType::kFloat, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<std::string> merged = kinds(t, -1);
    EXPECT_EQ(std::count(merged.begin(), merged.end(), "SoftmaxCrossEntropyLoss+ArgMax"), 1);
    EXPECT_EQ(std::count(merged.begin(), merged.end(), "ArgMax"), 0);
    // Over the rows: another reduction than the loss's.
    const std::vector<std::string> apart = kinds(t, 0);
    EXPECT_EQ(std::count(apart.begin(), apart.end(), "SoftmaxCrossEntropyLoss"), 1);
    EXPECT_EQ(std::count(apart.begin(), apart.end(), "ArgMax"), 1);
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
