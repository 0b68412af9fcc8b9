// Channels-last for 16-bit convolution chains (backends/cuda/channels_last.h), over the training
// step of a ResNet bottleneck (torchvision's Bottleneck as torch 1.13 exports it): the plan
// (device-free, here) runs every 16-bit convolution, pool and BatchNorm unit channels-last, stores
// what flows between them so, and transposes only values something row-major needs; fp32 steps
// and steps compiled with channels_last off are planned as before. The step's numerics both ways
// are checked against the CPU backend on a GPU or on the host stand-ins (the default, channels-
// last, by cuda_conv_batch_norm_test.cc; row-major here).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/channels_last.h"
#include "backends/cuda/schedule.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/fp16_conv_chain_model.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

bool layout_unit(const std::string& kind) {
  return kind.rfind("Conv", 0) == 0 || kind.rfind("BatchNormalization", 0) == 0 || kind.find("Pool") != std::string::npos;
}

TEST(CudaSchedule, A16BitBottleneckStepRunsItsConvolutionChainChannelsLast) {
  const Model forward = test::resnet_bottleneck();
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16})
    for (bool enabled : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(precision)) + (enabled ? "" : ", channels_last off"));
      TrainingStep step = test::sgd_momentum_step(forward, precision, "resnet_bottleneck");
      CompileOptions options = test::step_options(step);
      options.channels_last = enabled;
      const cuda::Schedule s(step.model, options);
      const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
      const bool expected = enabled && precision != DType::kFloat;

      size_t stored = 0;
      for (const cuda::TensorDesc& d : p.desc) stored += d.channels_last;
      size_t conversions = 0;
      std::map<std::string, int> kinds;
      for (const cuda::Unit* u : p.order) {
        conversions += cuda::conversions(p, *u).size();
        if (layout_unit(u->kind)) {
          ++kinds[u->kind];
          EXPECT_EQ(p.channels_last.count(u) > 0, expected) << u->kind << " at " << u->where;
        }
      }
      EXPECT_GE(kinds.size(), 6u);  // convolutions fused and not, their gradients, BatchNorm units, pools
      if (!expected) {
        EXPECT_TRUE(p.channels_last.empty());
        EXPECT_EQ(stored, 0u);
        EXPECT_EQ(conversions, 0u);
        continue;
      }
      // Who needs a value row-major: fed, state, fetched or updated, or a unit of neither kind.
      std::set<int> row_major_needed(s.state_values.begin(), s.state_values.end());
      for (int v : s.program.outputs) row_major_needed.insert(v);
      for (const auto& [st, v] : s.updates) row_major_needed.insert(v);
      for (int v : s.program.inputs) row_major_needed.insert(v);
      for (const cuda::Unit* u : p.order) {
        if (p.channels_last.count(u) || u->op->any_layout()) continue;
        for (int v : u->in) row_major_needed.insert(v);
        for (int v : u->out) row_major_needed.insert(v);
      }
      // Every transpose is at a region's edge; every value two channels-last units pass between
      // them is stored channels-last and never transposed.
      size_t inside = 0;
      for (const cuda::Unit* u : p.order)
        for (const cuda::LayoutConversion& c : cuda::conversions(p, *u))
          EXPECT_TRUE(row_major_needed.count(c.value) || !p.desc[c.value].channels_last)
              << u->kind << " transposes " << s.program.values[c.value].name << ", which nothing needs row-major";
      for (const cuda::Unit* u : p.order) {
        if (!p.channels_last.count(u)) continue;
        for (size_t k = 0; k < u->out.size(); ++k) {
          const int v = u->out[k];
          if (v < 0 || p.desc[v].dims.size() != 4 || p.desc[v].packed_bytes || row_major_needed.count(v)) continue;
          bool readers_cl = true;
          for (const cuda::Unit* r : p.order)
            for (int in : r->in)
              if (in == v) readers_cl &= p.channels_last.count(r) > 0 || r->op->any_layout();
          if (!readers_cl) continue;
          ++inside;
          EXPECT_TRUE(p.desc[v].channels_last) << s.program.values[v].name << " of " << u->kind;
        }
      }
      EXPECT_GT(inside, 10u);
      EXPECT_GT(stored, inside);
      // The input's Cast writes it channels-last, the filters' Casts and updates read and write
      // their own layouts, the pooled head reads the last block channels-last: nothing to transpose.
      EXPECT_EQ(conversions, 0u);
    }
}

// m's output y for input x on the CUDA backend (channels-last by default) agrees with the CPU
// backend's, and with the same plan row-major: bit for bit on the stand-ins (their convolutions sum
// alike in both layouts), within the fp16 bound on a GPU (the two layouts' kernels may differ).
void expect_channels_last_matches(const Model& m, Tensor x) {
  CompileOptions options;
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", std::move(x)}};
  const Tensor cpu = make_backend("cpu")->compile(m, options)->run(feeds, {"y"})[0];
  const Tensor gpu = make_backend("cuda")->compile(m, options)->run(feeds, {"y"})[0];
  options.channels_last = false;
  const Tensor row_major = make_backend("cuda")->compile(m, options)->run(feeds, {"y"})[0];
  test::expect_close(gpu, cpu, "y", 10.0);
  if (test::on_standins()) {
    EXPECT_TRUE(test::same_bits(gpu, row_major));
  }
  else test::expect_close(gpu, row_major, "y against the row-major plan", 10.0);
}

// Transposes at a region's edge (channels_last.cc's Converting): an fp16 convolution chain whose 3x3
// filter is an initializer (stored as ONNX lays it out: transposed before its convolution runs)
// and whose last convolution's result is read through a Flatten (a view, in ONNX's layout:
// transposed back after it) computes what the CPU backend computes, and what the same plan
// row-major computes, bit for bit (the stand-ins' convolutions sum alike in both layouts; on a
// GPU the two layouts' kernels may differ, within the fp16 bound).
TEST(CudaBackendGpu, AConvolutionChainTransposedAtItsEdgesMatchesTheCpu) {
  REQUIRE_GPU();
  for (bool flatten : {false, true}) {
    SCOPED_TRACE(flatten ? "Flatten head" : "Cast head");
    const Model m = test::fp16_conv_chain_model(flatten);
    CompileOptions options;
    const cuda::Schedule s(m, options);
    const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
    std::vector<std::string> converted;
    for (const cuda::Unit* u : p.order)
      for (const cuda::LayoutConversion& c : cuda::conversions(p, *u))
        converted.push_back((c.output ? "out " : "in ") + s.program.values[c.value].name);
    const std::vector<std::string> expected =
        flatten ? std::vector<std::string>{"in w3", "out conv1"} : std::vector<std::string>{"in w3"};
    EXPECT_EQ(converted, expected);
    expect_channels_last_matches(m, test::random_tensor(DType::kFloat, {2, 8, 12, 12}, 95, -2, 2));
  }
}

// MobileNet's and EfficientNet's block: Conv 1x1 -> BatchNorm -> Relu -> depthwise Conv 3x3 ->
// BatchNorm -> Relu -> Conv 1x1, in fp16 between the Casts of its fp32 input and output. The depthwise convolution keeps ONNX's layout (cuDNN's
// legacy API is not relied on for grouped NHWC), so the BatchNorm after it computes row-major
// rather than transposing the convolution's output in (and the values on either side follow);
// the 1x1 convolutions and the first BatchNorm compute channels-last, the Relus transposing as they
// compute. Nothing is transposed: the plan moves exactly the row-major plan's bytes.
Model depthwise_block() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  g.name = "depthwise_block";
  int seed = 20;
  auto init = [&](const std::string& name, DType t, std::vector<int64_t> dims, float lo, float hi) {
    Tensor w = test::random_tensor(t, dims, static_cast<uint32_t>(seed++), lo, hi);
    w.name = name;
    return g.add_initializer(w);
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out) {
    Node* n = g.add_node(op, in, {out});
    n->name = out;
    return n->output(0);
  };
  auto batch_norm = [&](Value* x, const std::string& name, int64_t c) {
    return node("BatchNormalization",
                {x, init(name + ".scale", DType::kFloat, {c}, 0.5f, 2), init(name + ".bias", DType::kFloat, {c}, -1, 1),
                 init(name + ".mean", DType::kFloat, {c}, -1, 1), init(name + ".var", DType::kFloat, {c}, 0.5f, 2)},
                name);
  };
  Value* x32 = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 8, 10, 10})));
  Node* cast = g.add_node("Cast", {x32}, {"x16"});
  cast->set_attr(Attribute::of_int("to", 10));
  Value* x = cast->output(0);
  Value* a = node("Relu", {batch_norm(node("Conv", {x, init("w_expand", DType::kFloat16, {24, 8, 1, 1}, -1, 1)}, "expand"),
                                      "bn1", 24)},
                  "relu1");
  Node* dw = g.add_node("Conv", {a, init("w_dw", DType::kFloat16, {24, 1, 3, 3}, -1, 1)}, {"depthwise"});
  dw->name = "depthwise";
  dw->set_attr(Attribute::of_int("group", 24));
  dw->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  Value* b = node("Relu", {batch_norm(dw->output(0), "bn2", 24)}, "relu2");
  Node* back = g.add_node("Cast", {node("Conv", {b, init("w_project", DType::kFloat16, {8, 24, 1, 1}, -1, 1)}, "project")},
                          {"y"});
  back->set_attr(Attribute::of_int("to", 1));
  back->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({2, 8, 10, 10})));
  g.add_output(back->output(0));
  return load_model_from_bytes(serialize_model(m), "depthwise_block.onnx", ".");
}

TEST(CudaSchedule, ABatchNormAfterADepthwiseConvolutionComputesRowMajorAndNothingIsTransposed) {
  const Model m = depthwise_block();
  CompileOptions options;
  const cuda::Schedule s(m, options);
  const cuda::ShapePlan p = test::plan_with(s, test::zero_feeds(s));
  std::map<std::string, bool> nhwc;  // by the unit's first node
  size_t conversions = 0;
  for (const cuda::Unit* u : p.order) {
    const size_t at = u->where.rfind(": node ");
    nhwc[u->where.substr(at + 7, u->where.find(' ', at + 7) - at - 7)] = p.channels_last.count(u) > 0;
    conversions += cuda::conversions(p, *u).size();
  }
  EXPECT_TRUE(nhwc.at("expand"));
  EXPECT_TRUE(nhwc.at("bn1"));
  EXPECT_FALSE(nhwc.at("depthwise"));
  EXPECT_FALSE(nhwc.at("bn2"));
  EXPECT_TRUE(nhwc.at("project"));
  EXPECT_EQ(conversions, 0u);
  EXPECT_TRUE(p.desc[s.program.find("bn1")].channels_last);
  EXPECT_FALSE(p.desc[s.program.find("bn2")].channels_last);
  EXPECT_FALSE(p.desc[s.program.find("relu1")].channels_last) << "the depthwise convolution reads it row-major";
}

// The same block run: the channels-last and row-major units side by side (a Relu transposing into
// the depthwise convolution, a 1x1 convolution reading a row-major Relu's result through its
// own layout) compute what the CPU backend computes, and on the stand-ins what the row-major plan
// computes bit for bit.
TEST(CudaBackendGpu, ADepthwiseBlockWithRegionsOfBothLayoutsMatchesTheCpu) {
  REQUIRE_GPU();
  expect_channels_last_matches(depthwise_block(), test::random_tensor(DType::kFloat, {2, 8, 10, 10}, 97, -2, 2));
}

// The 16-bit step with channels-last off computes what the CPU backend computes, as the default
// (channels-last) step does in cuda_conv_batch_norm_test.cc: the row-major path stays right.
TEST(CudaBackendGpu, TheBottleneckStepRowMajorTracksTheCpu) {
  REQUIRE_GPU();
  const Model forward = test::resnet_bottleneck();
  for (DType precision : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::sgd_momentum_step(forward, precision, "resnet_bottleneck");
    CompileOptions options = test::step_options(step);
    options.channels_last = false;
    test::expect_momentum_step_tracks_cpu(step, options, precision, {8, 3, 16, 16}, 90);
  }
}

#endif  // AMP_HAVE_CUDA

}  // namespace
}  // namespace amp
