// LayerNorm's forward with the residual stream's Add and its backward with the residual stream's
// gradient, each in one kernel (backends/cuda/layer_norm_residual_fusion.h). The backward: LayerNormalizationGrad(Cast(dY), X, Scale) -> dX,
// Add(dX, R) -> S, Cast(S) -> 16 bits runs as one unit whose S, 16-bit copy, dScale and dB are
// the CPU backend's (the reference, which runs the nodes apart) for rows of 48 and 768 elements
// (a warp a row) and 1100 (a block a row), R on either side of the Add, and a residual broadcast
// over the rows (the unit's generated-kernel path); twice (the second run replays a captured
// graph). The forward: Add(b, a) -> LayerNormalization -> Cast, with the sum kept or not and b
// broadcast (the generated-kernel path), likewise. The GPT training step's LayerNorms and their
// backwards take their residual Adds. Without a GPU the
// device checks run in test_cuda_backend_emulated and skip in test_backends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/schedule.h"
#include "graph/amp_ops.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::expect_close;
using test::random_tensor;

// dy (of type t, widened when 16 bits), x [rows, cols] fp32, scale [cols], r (r_dims) fp32; the sum
// narrowed directly, or after autodiff's SumToShape to sts_dims (a constant shape) when given.
Model layer_norm_residual(DType t, int64_t rows, int64_t cols, const std::vector<int64_t>& r_dims, bool r_first,
                          const std::vector<int64_t>& sts_dims = {}) {
  Model m;
  m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
  Graph& g = *m.graph;
  const DType f = DType::kFloat;
  Value* dy = g.add_input("dy", ValueType::tensor(t, Shape::of({rows, cols})));
  Value* x = g.add_input("x", ValueType::tensor(f, Shape::of({rows, cols})));
  Value* scale = g.add_input("scale", ValueType::tensor(f, Shape::of({cols})));
  Value* r = g.add_input("r", ValueType::tensor(f, Shape::of(r_dims)));
  if (t != f) {
    Node* widen = g.add_node("Cast", {dy}, {"dy32"});
    widen->set_attr(Attribute::of_int("to", static_cast<int64_t>(f)));
    widen->output(0)->set_type(ValueType::tensor(f, Shape::of({rows, cols})));
    dy = widen->output(0);
  }
  Node* grad = g.add_node("LayerNormalizationGrad", {dy, x, scale}, {"dx", "dscale", "dbias"}, kAmpDomain);
  grad->set_attr(Attribute::of_int("axis", -1));
  grad->output(0)->set_type(ValueType::tensor(f, Shape::of({rows, cols})));
  grad->output(1)->set_type(ValueType::tensor(f, Shape::of({cols})));
  grad->output(2)->set_type(ValueType::tensor(f, Shape::of({cols})));
  Node* add = g.add_node("Add", r_first ? std::vector<Value*>{r, grad->output(0)} : std::vector<Value*>{grad->output(0), r},
                         {"sum"});
  add->output(0)->set_type(ValueType::tensor(f, Shape::of({rows, cols})));
  const DType low = t == f ? DType::kBFloat16 : t;
  Value* narrowed_input = add->output(0);
  std::vector<int64_t> narrowed_dims = {rows, cols};
  if (!sts_dims.empty()) {
    Tensor shape(DType::kInt64, {static_cast<int64_t>(sts_dims.size())});
    for (size_t k = 0; k < sts_dims.size(); ++k) shape.mutable_as<int64_t>()[k] = sts_dims[k];
    shape.name = "sts_shape";
    Node* sts = g.add_node("SumToShape", {add->output(0), g.add_initializer(std::move(shape))}, {"summed"}, kAmpDomain);
    sts->output(0)->set_type(ValueType::tensor(f, Shape::of(sts_dims)));
    narrowed_input = sts->output(0);
    narrowed_dims = sts_dims;
  }
  Node* narrow = g.add_node("Cast", {narrowed_input}, {"sum_low"});
  narrow->set_attr(Attribute::of_int("to", static_cast<int64_t>(low)));
  narrow->output(0)->set_type(ValueType::tensor(low, Shape::of(narrowed_dims)));
  for (Value* v : {add->output(0), narrow->output(0), grad->output(1), grad->output(2)}) g.add_output(v);
  return m;
}

const std::vector<std::string> kFetches = {"sum", "sum_low", "dscale", "dbias"};

TEST(CudaBackendGpu, LayerNormBackwardAddsTheResidualStreamsGradientInItsKernel) {
  REQUIRE_GPU();
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (int64_t cols : {int64_t{48}, int64_t{768}, int64_t{1100}})
      for (int variant = 0; variant < 5; ++variant) {
          // 0: R second; 1: R first; 2: R broadcast over the rows; 3: the Cast after a SumToShape
          // that sums nothing; 4: after one that sums the rows.
          const bool r_first = variant == 1, broadcast = variant == 2;
          const int64_t rows = 37;
          const std::vector<int64_t> sts = variant == 3   ? std::vector<int64_t>{rows, cols}
                                           : variant == 4 ? std::vector<int64_t>{1, cols}
                                                          : std::vector<int64_t>{};
          SCOPED_TRACE(std::string(dtype_name(t)) + ", " + std::to_string(cols) + " columns, variant " +
                       std::to_string(variant));
          const std::vector<int64_t> r_dims = broadcast ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
          const Model m = layer_norm_residual(t, rows, cols, r_dims, r_first, sts);
          const std::vector<std::pair<std::string, Tensor>> feeds = {
              {"dy", random_tensor(t, {rows, cols}, 11)},
              {"x", random_tensor(DType::kFloat, {rows, cols}, 12, -3.0f, 5.0f)},
              {"scale", random_tensor(DType::kFloat, {cols}, 13, 0.5f, 1.5f)},
              {"r", random_tensor(DType::kFloat, r_dims, 14)}};
          auto cpu = make_backend("cpu")->compile(m, {});
          auto gpu = make_backend("cuda")->compile(m, {});
          const std::vector<Tensor> want = cpu->run(feeds, kFetches);
          for (int run = 0; run < 2; ++run) {
            const std::vector<Tensor> got = gpu->run(feeds, kFetches);
            for (size_t k = 0; k < kFetches.size(); ++k)
              expect_close(got[k], want[k], kFetches[k] + ", run " + std::to_string(run), 10.0);
          }
      }
}

// The forward: a [rows, cols] fp32 plus b (b_dims, of type t: widened by a Cast when 16 bits)
// -> Add -> x -> LayerNormalization(x, scale, bias) -> y, narrowed to t when 16 bits; outputs y and,
// with keep_sum, x.
Model residual_layer_norm(DType t, int64_t rows, int64_t cols, const std::vector<int64_t>& b_dims, bool keep_sum) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  const DType f = DType::kFloat;
  Value* a = g.add_input("a", ValueType::tensor(f, Shape::of({rows, cols})));
  Value* b = g.add_input("b", ValueType::tensor(t, Shape::of(b_dims)));
  Value* scale = g.add_input("scale", ValueType::tensor(f, Shape::of({cols})));
  Value* bias = g.add_input("bias", ValueType::tensor(f, Shape::of({cols})));
  if (t != f) {
    Node* widen = g.add_node("Cast", {b}, {"b32"});
    widen->set_attr(Attribute::of_int("to", static_cast<int64_t>(f)));
    widen->output(0)->set_type(ValueType::tensor(f, Shape::of(b_dims)));
    b = widen->output(0);
  }
  Node* add = g.add_node("Add", {b, a}, {"x"});
  add->output(0)->set_type(ValueType::tensor(f, Shape::of({rows, cols})));
  Node* ln = g.add_node("LayerNormalization", {add->output(0), scale, bias}, {"y32"});
  ln->set_attr(Attribute::of_int("axis", -1));
  ln->output(0)->set_type(ValueType::tensor(f, Shape::of({rows, cols})));
  Value* y = ln->output(0);
  if (t != f) {
    Node* narrow = g.add_node("Cast", {y}, {"y"});
    narrow->set_attr(Attribute::of_int("to", static_cast<int64_t>(t)));
    narrow->output(0)->set_type(ValueType::tensor(t, Shape::of({rows, cols})));
    y = narrow->output(0);
  }
  g.add_output(y);
  if (keep_sum) g.add_output(add->output(0));
  return m;
}

TEST(CudaBackendGpu, LayerNormAddsTheResidualStreamInItsKernel) {
  REQUIRE_GPU();
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (int64_t cols : {int64_t{48}, int64_t{768}, int64_t{1100}})
      for (int variant = 0; variant < 3; ++variant) {
        // 0: the sum kept; 1: only the LayerNorm reads it; 2: b broadcast over the rows.
        const bool keep_sum = variant != 1, broadcast = variant == 2;
        const int64_t rows = 37;
        SCOPED_TRACE(std::string(dtype_name(t)) + ", " + std::to_string(cols) + " columns, variant " +
                     std::to_string(variant));
        const std::vector<int64_t> b_dims = broadcast ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
        const Model m = residual_layer_norm(t, rows, cols, b_dims, keep_sum);
        const std::vector<std::pair<std::string, Tensor>> feeds = {
            {"a", random_tensor(DType::kFloat, {rows, cols}, 21, -3.0f, 5.0f)},
            {"b", random_tensor(t, b_dims, 22)},
            {"scale", random_tensor(DType::kFloat, {cols}, 23, 0.5f, 1.5f)},
            {"bias", random_tensor(DType::kFloat, {cols}, 24)}};
        std::vector<std::string> fetches = {t == DType::kFloat ? "y32" : "y"};
        if (keep_sum) fetches.push_back("x");
        auto cpu = make_backend("cpu")->compile(m, {});
        auto gpu = make_backend("cuda")->compile(m, {});
        const std::vector<Tensor> want = cpu->run(feeds, fetches);
        for (int run = 0; run < 2; ++run) {
          const std::vector<Tensor> got = gpu->run(feeds, fetches);
          for (size_t k = 0; k < fetches.size(); ++k)
            expect_close(got[k], want[k], fetches[k] + ", run " + std::to_string(run), 10.0);
        }
      }
}

TEST(CudaSchedule, LayerNormBackwardsTakeTheirResidualAdds) {
  for (const std::vector<int64_t>& sts : {std::vector<int64_t>{}, std::vector<int64_t>{4, 48}}) {
    SCOPED_TRACE(sts.empty() ? "the model above" : "the model above, its Cast after a SumToShape");
    const Model m = layer_norm_residual(DType::kBFloat16, 4, 48, {4, 48}, false, sts);
    const cuda::Schedule s(m, {});
    int fused = 0, others = 0;
    for (const auto& u : s.units) {
      fused += u->kind.rfind("LayerNormalizationGrad+Add", 0) == 0 && u->out.size() == 4 && u->out[3] >= 0;
      others += u->kind.rfind("LayerNormalizationGrad", 0) != 0;
    }
    EXPECT_EQ(fused, 1) << "with the narrowed sum";
    EXPECT_EQ(others, 0) << "the Add, the SumToShape and both Casts are the unit's";
  }
  for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE("gpt's step, " + std::string(dtype_name(precision)));
    const TrainingStep step = test::mixed_precision_step("gpt.train.onnx", precision);
    const cuda::Schedule s(step.model, test::step_options(step));
    int fused = 0, narrowed = 0;
    for (const auto& u : s.units)
      if (u->kind.rfind("LayerNormalizationGrad+Add", 0) == 0) {
        ++fused;
        narrowed += u->out.size() == 4 && u->out[3] >= 0;
      }
    EXPECT_EQ(fused, 4) << "2 layers, each LayerNorm's input a residual stream";
    EXPECT_EQ(narrowed, 3) << "all but the first block's first, whose gradient goes to the embeddings";
    int forward = 0;
    for (const auto& u : s.units) forward += u->kind.rfind("LayerNormalization+Add", 0) == 0;
    EXPECT_EQ(forward, 5) << "every LayerNorm reads a residual stream's sum; the first adds the position table";
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
