// BatchNorm + residual Add + ReLU as fused device units (backends/cuda/batch_norm_relu_fusion.h):
// the plan of a training step takes every such layer as one forward and one backward unit with
// the ReLU's mask as bits (device-free, here); the units compute what the CPU backend computes
// for the unfused nodes, in fp32, fp16 and bf16, NCHW and [N, C], alone and in a whole training
// step (on a GPU, or in test_cuda_backend_emulated on the host stand-ins with the kernels on the
// fiber emulator).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/half.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/schedule.h"
#include "graph/amp_ops.h"
#include "tests/support/backend_parity.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::random_tensor;

// y = Relu(BatchNormalization(x) [+ z]) and the backward autodiff writes for it when dY reaches
// y: g = Where(Greater(y, 0), dY, 0), dX, dscale, dB = BatchNormalizationGrad(g, x, scale); g is
// also read by a Neg (the residual's other branch in a ResNet); with `summed`, dY is the Add of two
// gradients (dy and dy2), as a residual block's input gets it. With `shortcut` (a downsampling
// block), z is BatchNormalization(x2) and g's other reader its BatchNormalizationGrad instead of
// the Neg. Every result is an output.
Model bn_relu_layer(DType t, const std::vector<int64_t>& dims, bool residual, bool summed = false,
                    bool shortcut = false) {
  Model m;
  m.opset_imports = {{"", 17}, {kAmpDomain, 1}};
  Graph& g = *m.graph;
  const std::vector<int64_t> channels{dims[1]};
  auto input = [&](const std::string& name, DType e, const std::vector<int64_t>& d) {
    return g.add_input(name, ValueType::tensor(e, Shape::of(d)));
  };
  // Output 0 of x's dims (a Constant's: a scalar), the others per channel in float; typed with
  // their shapes, as an export's shape inference leaves them.
  auto node = [&](const std::string& op, std::vector<Value*> in, std::vector<std::string> out, DType e,
                  const std::string& domain = "") {
    Node* n = g.add_node(op, std::move(in), std::move(out), domain);
    for (size_t k = 0; k < n->outputs().size(); ++k)
      n->output(k)->set_type(k == 0 ? ValueType::tensor(e, Shape::of(op == "Constant" ? std::vector<int64_t>{} : dims))
                                    : ValueType::tensor(DType::kFloat, Shape::of(channels)));
    return n;
  };
  Value* x = input("x", t, dims);
  Value* scale = input("scale", DType::kFloat, channels);
  Value* bias = input("bias", DType::kFloat, channels);
  Value* mean = input("mean", DType::kFloat, channels);
  Value* var = input("var", DType::kFloat, channels);
  Value* dy = input("dy", t, dims);
  if (summed) dy = node("Add", {dy, input("dy2", t, dims)}, {"dy_sum"}, t)->output(0);
  Tensor zero_value(t, {});
  if (t == DType::kFloat) *zero_value.mutable_as<float>() = 0.0f;
  else *zero_value.mutable_as<uint16_t>() = 0;  // +0 in fp16 and bf16
  Node* zero = node("Constant", {}, {"zero"}, t);
  zero->set_attr(Attribute::of_tensor("value", zero_value));
  Node* bn = node("BatchNormalization", {x, scale, bias, mean, var}, {"bn", "running_mean", "running_var"}, t);
  bn->set_attr(Attribute::of_int("training_mode", 1));
  bn->set_attr(Attribute::of_float("momentum", 0.8f));
  Value* pre = bn->output(0);
  Node* bn2 = nullptr;
  if (shortcut) {
    bn2 = node("BatchNormalization",
               {input("x2", t, dims), input("scale2", DType::kFloat, channels), input("bias2", DType::kFloat, channels),
                input("mean2", DType::kFloat, channels), input("var2", DType::kFloat, channels)},
               {"bn2", "running_mean2", "running_var2"}, t);
    bn2->set_attr(Attribute::of_int("training_mode", 1));
    bn2->set_attr(Attribute::of_float("momentum", 0.8f));
  }
  if (residual) pre = node("Add", {pre, shortcut ? bn2->output(0) : input("z", t, dims)}, {"sum"}, t)->output(0);
  Value* y = node("Relu", {pre}, {"y"}, t)->output(0);
  Value* mask = node("Greater", {y, zero->output(0)}, {"mask"}, DType::kBool)->output(0);
  Value* grad = node("Where", {mask, dy, zero->output(0)}, {"g"}, t)->output(0);
  Node* bn_grad = node("BatchNormalizationGrad", {grad, x, scale}, {"dx", "dscale", "dbias"}, t, kAmpDomain);
  for (Value* v : {y, bn->output(1), bn->output(2), bn_grad->output(0), bn_grad->output(1), bn_grad->output(2)})
    g.add_output(v);
  if (!shortcut) {
    g.add_output(node("Neg", {grad}, {"other_branch"}, t)->output(0));
    return m;
  }
  Node* grad2 = node("BatchNormalizationGrad", {grad, g.value("x2"), g.value("scale2")}, {"dx2", "dscale2", "dbias2"},
                     t, kAmpDomain);
  for (Value* v : {bn2->output(1), bn2->output(2), grad2->output(0), grad2->output(1), grad2->output(2)})
    g.add_output(v);
  return m;
}

std::vector<std::string> layer_outputs(bool shortcut) {
  std::vector<std::string> out = {"y", "running_mean", "running_var", "dx", "dscale", "dbias"};
  const std::vector<std::string> more = shortcut ? std::vector<std::string>{"running_mean2", "running_var2", "dx2",
                                                                            "dscale2", "dbias2"}
                                                 : std::vector<std::string>{"other_branch"};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

TEST(CudaSchedule, BatchNormAddReluAndTheirBackwardAreTwoUnitsWithTheMaskAsBits) {
  const Model m = bn_relu_layer(DType::kBFloat16, {4, 6, 5, 5}, true, true);
  const cuda::Schedule s(m, {});
  const std::vector<Tensor> feeds = test::zero_feeds(s);
  const cuda::ShapePlan p = test::plan_with(s, feeds);
  std::vector<std::string> got;
  for (const cuda::Unit* u : p.order)
    if (u->kind.find("fused") == std::string::npos) got.push_back(u->kind);
  EXPECT_EQ(got, (std::vector<std::string>{"BatchNormalization+Add+Relu+Greater", "BatchNormalizationGrad+Where+Add"}));
  const int mask = s.program.find("mask");
  EXPECT_EQ(p.desc[mask].packed_bytes, cuda::relu_bits_bytes(4 * 6 * 5 * 5)) << "one bit per element, whole words";
  // The backward reads the two gradients the Add summed (the sum is never stored) and writes
  // Where's result for the Neg beside it.
  const cuda::Unit& back = *p.order[1];
  EXPECT_EQ(back.in.at(4), s.program.find("dy2"));
  EXPECT_EQ(back.out.at(3), s.program.find("g"));

  // A downsampling block: the shortcut's BatchNorm and its gradient join the two units, and
  // neither the shortcut's result nor Where's is stored.
  const Model ds = bn_relu_layer(DType::kBFloat16, {4, 6, 5, 5}, true, true, true);
  const cuda::Schedule s2(ds, {});
  const cuda::ShapePlan p2 = test::plan_with(s2, test::zero_feeds(s2));
  got.clear();
  for (const cuda::Unit* u : p2.order) got.push_back(u->kind);
  EXPECT_EQ(got, (std::vector<std::string>{"BatchNormalization+Add+BatchNormalization+Relu+Greater",
                                           "BatchNormalizationGrad+Where+Add+BatchNormalizationGrad"}));
  ASSERT_EQ(p2.order.size(), 2u);
  EXPECT_EQ(p2.order[1]->out.at(3), -1) << "Where's result is read by the two gradients inside the unit only";
  EXPECT_EQ(p2.order[1]->out.at(4), s2.program.find("dx2"));
}

// Every BatchNorm of models/cnn.train.onnx is followed by a ReLU (one after the residual Add):
// in its mixed-precision training steps all four run fused both ways, and no BatchNorm, ReLU or
// BatchNorm gradient is left as a unit of its own. In fp16 and bf16 the block's first BatchNorm +
// ReLU, between two convolutions, runs inside them (conv_batch_norm_fusion.h).
TEST(CudaSchedule, EveryBatchNormOfTheCnnStepRunsFusedBothWays) {
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step("cnn.train.onnx", precision);
    const cuda::Schedule s(step.model, test::step_options(step));
    const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
    std::map<std::string, int> kinds;
    std::string listing;
    for (const cuda::Unit* u : p.order) {
      ++kinds[u->kind];
      listing += "  " + u->kind + "\n";
    }
    const bool sixteen = precision != DType::kFloat;
    EXPECT_EQ(kinds["BatchNormalization+Relu+Greater"], sixteen ? 2 : 3) << listing;
    EXPECT_EQ(kinds["Conv+Greater"], sixteen ? 1 : 0) << listing;
    EXPECT_EQ(kinds["Conv+BatchNormalization+Relu"], sixteen ? 1 : 0) << listing;
    EXPECT_EQ(kinds["BatchNormalization+Add+Relu+Greater"], 1) << listing;
    EXPECT_EQ(kinds["BatchNormalizationGrad+Where"], 4) << listing;
    for (const char* alone : {"BatchNormalization", "BatchNormalizationGrad", "Relu"})
      EXPECT_EQ(kinds[alone], 0) << alone;
  }
}

// The fused units against the CPU backend running the same nodes one by one. The CPU rounds
// BatchNorm's result and the Add's to the storage type before the ReLU, the unit rounds the sum
// once: in fp16 and bf16 an element within that rounding of 0 can take the other side of the
// ReLU, so up to 2 elements of dX and g may differ there (the statistics and the parameter
// gradients are sums over every element and stay within the tolerance).
TEST(CudaBackendGpu, FusedBatchNormReluMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> dims;
    bool residual, summed, shortcut;
  };
  // NCHW (each channel in runs of 25, of 49 over 9 images, and of 400: planes smaller and larger
  // than a block of the statistics kernel), and [N, C]: C past one tile of 32 channels (the vector
  // kernels: 5 groups of 8 channels, 51 rows a block at once), C = 2056 (257 groups: two tiles of
  // a block's 256 threads, the second of one group) and C = 12 (not a multiple of 8: the
  // one-element kernels), each with the residual's summed gradient; planes of 400 and of 32 (a
  // multiple of 8: the plane vector kernels, the second with a shortcut) and rows of 48 channels
  // with a shortcut (the row vector kernels' second BatchNorm).
  const Case cases[] = {{{4, 6, 5, 5}, true, true, false},
                        {{4, 6, 5, 5}, false, false, false},
                        {{24, 40}, false, true, false},
                        {{3, 2056}, true, true, false},
                        {{10, 12}, true, true, false},
                        {{4, 6, 5, 5}, true, true, true},
                        {{9, 5, 7, 7}, false, true, false},
                        {{3, 4, 20, 20}, true, true, false},
                        {{2, 3, 4, 8}, true, false, true},
                        {{16, 48}, true, true, true}};
  uint32_t seed = 300;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (c.residual ? " residual" : "") + (c.summed ? " summed" : "") +
                   (c.shortcut ? " shortcut " : " ") + std::to_string(c.dims.size()) + "-d");
      const Model m = bn_relu_layer(t, c.dims, c.residual, c.summed, c.shortcut);
      {  // the units under test, not the unfused nodes
        const cuda::Schedule s(m, {});
        const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
        std::string kinds;
        for (const cuda::Unit* u : p.order) kinds += u->kind + ";";
        const std::string forward = c.shortcut   ? "BatchNormalization+Add+BatchNormalization+Relu+Greater;"
                                    : c.residual ? "BatchNormalization+Add+Relu+Greater;"
                                                 : "BatchNormalization+Relu+Greater;";
        const std::string backward = std::string("BatchNormalizationGrad+Where") + (c.summed ? "+Add" : "") +
                                     (c.shortcut ? "+BatchNormalizationGrad;" : ";");
        EXPECT_NE(kinds.find(forward), std::string::npos) << kinds;
        EXPECT_NE(kinds.find(backward), std::string::npos) << kinds;
      }
      const std::vector<int64_t> channels{c.dims[1]};
      // x away from 0 on average (mean 1.5): the statistics must not depend on a small mean.
      test::Feeds feeds = {{"x", random_tensor(t, c.dims, seed++, -1.0f, 4.0f)},
                           {"scale", random_tensor(DType::kFloat, channels, seed++, 0.5f, 2.0f)},
                           {"bias", random_tensor(DType::kFloat, channels, seed++)},
                           {"mean", random_tensor(DType::kFloat, channels, seed++)},
                           {"var", random_tensor(DType::kFloat, channels, seed++, 0.5f, 2.0f)},
                           {"dy", random_tensor(t, c.dims, seed++)}};
      if (c.shortcut) {
        feeds.push_back({"x2", random_tensor(t, c.dims, seed++, -3.0f, 1.0f)});
        feeds.push_back({"scale2", random_tensor(DType::kFloat, channels, seed++, 0.5f, 2.0f)});
        feeds.push_back({"bias2", random_tensor(DType::kFloat, channels, seed++)});
        feeds.push_back({"mean2", random_tensor(DType::kFloat, channels, seed++)});
        feeds.push_back({"var2", random_tensor(DType::kFloat, channels, seed++, 0.5f, 2.0f)});
      } else if (c.residual) {
        feeds.push_back({"z", random_tensor(t, c.dims, seed++)});
      }
      if (c.summed) feeds.push_back({"dy2", random_tensor(t, c.dims, seed++)});
      const std::vector<std::string> outputs = layer_outputs(c.shortcut);
      const std::vector<Tensor> cpu = make_backend("cpu")->compile(m, {})->run(feeds, outputs);
      auto exe = make_backend("cuda")->compile(m, {});
      std::vector<Tensor> gpu;
      for (int r = 0; r < 3; ++r) gpu = exe->run(feeds, outputs);  // the last replays a captured graph
      const size_t kinks = t == DType::kFloat ? 0 : 2;
      for (size_t k = 0; k < outputs.size(); ++k) {
        const bool elementwise =
            outputs[k] == "dx" || outputs[k] == "dx2" || outputs[k] == "other_branch" || outputs[k] == "y";
        test::expect_close(gpu[k], cpu[k], outputs[k], 10.0, elementwise ? kinks : 0);
      }
    }
}

// The plain training-mode BatchNormalization and its gradient (no ReLU: efficientnet's, before a
// SiLU) on the same kernels against the CPU backend: planes of 25 (one element a thread) and of 64
// (8 a thread), rows of 40 channels (8 a thread) and of 12 (one), in fp32, fp16 and bf16; Y, the
// running statistics, dX, dscale and dbias.
TEST(CudaBackendGpu, PlainTrainingBatchNormsAndTheirGradientsMatchTheCpu) {
  REQUIRE_GPU();
  const DType f = DType::kFloat;
  uint32_t seed = 700;
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{4, 3, 5, 5}, {2, 5, 8, 8}, {6, 40}, {6, 12}})
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(dims.size()) + "-d, " +
                   std::to_string(dims[1]) + " channels");
      const std::vector<int64_t> ch{dims[1]};
      const Tensor x = random_tensor(t, dims, seed++, -1.0f, 4.0f), dy = random_tensor(t, dims, seed++);
      const Tensor scale = random_tensor(f, ch, seed++, 0.5f, 2.0f);
      test::OneNode bn("BatchNormalization",
                       {{"x", x}, {"scale", scale}, {"bias", random_tensor(f, ch, seed++)},
                        {"mean", random_tensor(f, ch, seed++)}, {"var", random_tensor(f, ch, seed++, 0.5f, 2.0f)}},
                       {t, f, f});
      bn.attr(Attribute::of_int("training_mode", 1)).attr(Attribute::of_float("momentum", 0.8f));
      test::expect_parity(bn.m, bn.feeds, bn.outputs, 10.0);
      test::OneNode grad("BatchNormalizationGrad", {{"dy", dy}, {"x", x}, {"scale", scale}}, {t, f, f}, kAmpDomain);
      test::expect_parity(grad.m, grad.feeds, grad.outputs, 10.0);
    }
}

// models/cnn.train.onnx's whole training step (its Dropout's ratio set to 0, as the device draws
// other masks than the CPU) in fp32, fp16 and bf16, every BatchNorm as the fused units, with SGD
// and momentum 0.9 as ResNets train (fp16 with a dynamic loss scale): the losses of 5 steps and
// every parameter, running statistic and momentum buffer after them track the CPU backend's.
TEST(CudaBackendGpu, TheCnnTrainingStepWithFusedBatchNormsTracksTheCpu) {
  REQUIRE_GPU();
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    Model m = test::shipped_model("cnn.train.onnx");
    for (Node* n : m.graph->nodes())
      if (n->op_type() == "Dropout") {
        Tensor zero(DType::kFloat, {});
        *zero.mutable_as<float>() = 0.0f;
        n->input(1)->producer()->set_attr(Attribute::of_tensor("value", zero));
      }
    TrainingStep step = test::sgd_momentum_step(m, precision, "cnn.train.onnx");
    test::expect_momentum_step_tracks_cpu(step, test::step_options(step), precision, {4, 1, 28, 28}, 70, 5, 0, 1);
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
