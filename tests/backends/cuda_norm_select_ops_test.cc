// The CUDA backend's InstanceNormalization, MeanVarianceNormalization, ReduceLogSumExp, TopK,
// Hardmax, MaxUnpool, RoiAlign, ai.onnx_amp DeformConv and GridSample (style-transfer and GAN
// normalisation, detection heads, generation's top-k, spatial transformers) against the CPU backend, the reference, through whole compiled models (two
// runs: the second replays a captured graph), in fp32, fp16 and bf16 where the device takes them;
// and a training step through InstanceNormalization, whose gradient is autodiff's standard ops.
// The kernels themselves are checked case by case on the fiber emulator (tests/cuda_emulated/).
// Without a GPU these run in test_cuda_backend_emulated and skip in test_backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/error.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "passes/training/training_step.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::expect_close;
using test::Feeds;
using test::OneNode;
using test::random_tensor;

constexpr DType kFloats[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16};

Tensor ints(std::vector<int64_t> dims, std::vector<int64_t> v) {
  Tensor t(DType::kInt64, std::move(dims));
  for (size_t k = 0; k < v.size(); ++k) t.mutable_as<int64_t>()[k] = v[k];
  return t;
}

// Values from a few levels, so that lanes have ties.
Tensor levels(DType t, const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor x = random_tensor(t, dims, seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-4, 4);
  for (int64_t k = 0; k < x.numel(); ++k) {
    if (t == DType::kInt64) x.mutable_as<int64_t>()[k] = level(rng);
    else if (t == DType::kInt32) x.mutable_as<int32_t>()[k] = level(rng);
    else test::put_float(x, k, 0.5f * static_cast<float>(level(rng)));
  }
  return x;
}

// An input given as an initializer: known on the host while planning (TopK's K, MaxUnpool's
// output_shape).
void add_constant(OneNode& one, Tensor t, const std::string& name) {
  t.name = name;
  one.node->append_input(one.m.graph->add_initializer(std::move(t)));
}

// The CPU's results and the device's (two runs: the second replays a captured graph);
// tol_scale 0: equal.
void expect_parity(const OneNode& one, double tol_scale) {
  const std::vector<Tensor> cpu = make_backend("cpu")->compile(one.m, {})->run(one.feeds, one.outputs);
  auto exe = make_backend("cuda")->compile(one.m, {});
  std::vector<Tensor> gpu;
  for (int r = 0; r < 2; ++r) gpu = exe->run(one.feeds, one.outputs);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) expect_close(gpu[k], cpu[k], one.outputs[k], tol_scale);
}

TEST(CudaNormSelectOps, TheDeviceRunsThemAndRefusesOtherTypesByName) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
  Value* d = g.add_input("d", ValueType::tensor(DType::kDouble, Shape::of({2, 2})));
  Value* u = g.add_input("u", ValueType::tensor(DType::kUInt8, Shape::of({2, 2})));
  Value* b = g.add_input("b", ValueType::tensor(DType::kBFloat16, Shape::of({2, 2})));
  const cuda::CudaBackend backend;
  for (const char* op : {"InstanceNormalization", "MeanVarianceNormalization", "ReduceLogSumExp", "TopK", "Hardmax",
                         "MaxUnpool", "RoiAlign", "GridSample"}) {
    Node* n = g.add_node(op, {x}, std::vector<std::string>{std::string(op) + "_out"});
    EXPECT_EQ(backend.unsupported_reason(*n), "") << op;
  }
  EXPECT_EQ(backend.unsupported_reason(*g.add_node("TopK", {d}, std::vector<std::string>{"topk_double"})), "");
  const std::vector<std::pair<const char*, Value*>> refused = {{"InstanceNormalization", d},
                                                               {"MeanVarianceNormalization", d},
                                                               {"ReduceLogSumExp", d},
                                                               {"Hardmax", d},
                                                               {"TopK", u},
                                                               {"RoiAlign", b},
                                                               {"GridSample", d}};
  for (const auto& [op, in] : refused) {
    Node* n = g.add_node(op, {in}, std::vector<std::string>{std::string(op) + "_" + in->name()});
    EXPECT_NE(backend.unsupported_reason(*n).find(std::string(op) + " runs on the device only on"), std::string::npos)
        << op << ": " << backend.unsupported_reason(*n);
  }
}

TEST(CudaNormSelectOps, InstanceAndMeanVarianceNormalizationMatchTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 700;
  for (DType t : kFloats) {
    SCOPED_TRACE(dtype_name(t));
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 3, 5, 5}, std::vector<int64_t>{1, 4, 300}}) {
      OneNode one("InstanceNormalization",
                  {{"x", random_tensor(t, dims, seed++, 1.0f, 3.0f)},
                   {"scale", random_tensor(t, {dims[1]}, seed++, 0.5f, 1.5f)},
                   {"B", random_tensor(t, {dims[1]}, seed++)}},
                  {t});
      one.attr(Attribute::of_float("epsilon", 1e-3f));
      expect_parity(one, 1.0);
    }
    expect_parity(OneNode("MeanVarianceNormalization", {{"x", random_tensor(t, {2, 3, 4, 5}, seed++)}}, {t}), 1.0);
    OneNode mvn("MeanVarianceNormalization", {{"x", random_tensor(t, {3, 6, 7}, seed++)}}, {t});
    mvn.attr(Attribute::of_ints("axes", {0, -1}));
    expect_parity(mvn, 1.0);
  }
}

TEST(CudaNormSelectOps, ReduceLogSumExpMatchesTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 720;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 40, 5}, {0, 2}}, {{6, 300}, {1}}, {{3, 1, 5}, {1}}, {{4, 6}, {}}};
  for (DType t : kFloats)
    for (const auto& [dims, axes] : cases)
      for (int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " rank " + std::to_string(dims.size()) + " keepdims " +
                     std::to_string(keepdims));
        OneNode one("ReduceLogSumExp", {{"x", random_tensor(t, dims, seed++, -20.0f, 20.0f)}}, {t});
        if (!axes.empty()) one.attr(Attribute::of_ints("axes", axes));
        one.attr(Attribute::of_int("keepdims", keepdims));
        expect_parity(one, 1.0);
      }
}

TEST(CudaNormSelectOps, TopKAndHardmaxMatchTheCpuExactly) {
  REQUIRE_GPU();
  uint32_t seed = 740;
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis, k;
  };
  const Case cases[] = {{{4, 30}, -1, 5}, {{3, 9, 4}, 1, 9}, {{2, 5, 3}, 0, 1}, {{3, 8}, 1, 0}};
  std::vector<DType> types(std::begin(kFloats), std::end(kFloats));
  types.insert(types.end(), {DType::kInt32, DType::kInt64});
  for (DType t : types)
    for (const Case& c : cases)
      for (int64_t largest : {0, 1}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(c.axis) + " k " + std::to_string(c.k) +
                     " largest " + std::to_string(largest));
        OneNode one("TopK", {{"x", levels(t, c.dims, seed++)}}, {t, DType::kInt64});
        add_constant(one, ints({1}, {c.k}), "k");
        one.attr(Attribute::of_int("axis", c.axis));
        one.attr(Attribute::of_int("largest", largest));
        expect_parity(one, 0.0);
      }
  for (DType t : kFloats)
    for (int64_t axis : {-1, 1}) {
      OneNode one("Hardmax", {{"x", levels(t, {3, 7, 6}, seed++)}}, {t});
      one.attr(Attribute::of_int("axis", axis));
      expect_parity(one, 0.0);
    }
}

// K decides the outputs' shapes, so it is read while planning: fed at run time it is a
// shape-deciding feed (each K its own plan), and so is a feed it is computed from (here by ArgMax,
// then a host step). One computed on the device is refused by the schedule, before the op.
TEST(CudaNormSelectOps, TopKTakesKFromAFeedOrAHostStep) {
  REQUIRE_GPU();
  for (int64_t k : {2, 7}) {
    OneNode one("TopK", {{"x", levels(DType::kFloat, {3, 8}, 760)}, {"k", ints({1}, {k})}},
                {DType::kFloat, DType::kInt64});
    expect_parity(one, 0.0);
  }
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({3, 8})));
  Value* w = g.add_input("w", ValueType::tensor(DType::kFloat, Shape::of({6})));
  Node* arg = g.add_node("ArgMax", {w}, std::vector<std::string>{"k"});
  arg->set_attr(Attribute::of_int("keepdims", 1));
  Node* top = g.add_node("TopK", {x, arg->output(0)}, std::vector<std::string>{"values", "indices"});
  g.add_output(top->output(0));
  g.add_output(top->output(1));
  const Feeds feeds = {{"x", levels(DType::kFloat, {3, 8}, 761)}, {"w", random_tensor(DType::kFloat, {6}, 762)}};
  const std::vector<Tensor> cpu = make_backend("cpu")->compile(m, {})->run(feeds, {"values", "indices"});
  const std::vector<Tensor> gpu = make_backend("cuda")->compile(m, {})->run(feeds, {"values", "indices"});
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_TRUE(gpu[0].same_contents(cpu[0]));
  EXPECT_TRUE(gpu[1].same_contents(cpu[1]));
}

TEST(CudaNormSelectOps, MaxUnpoolAndRoiAlignMatchTheCpuExactly) {
  REQUIRE_GPU();
  uint32_t seed = 780;
  std::vector<DType> unpool_types(std::begin(kFloats), std::end(kFloats));
  unpool_types.push_back(DType::kDouble);
  for (DType t : unpool_types)
    for (bool with_shape : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (with_shape ? " with output_shape" : ""));
      std::mt19937 rng(seed++);
      std::vector<int64_t> at(2 * 3 * 4 * 4);
      for (int64_t& a : at) a = std::uniform_int_distribution<int64_t>(0, 2 * 3 * 8 * 8 - 1)(rng);
      Tensor x = t == DType::kDouble ? Tensor(DType::kDouble, {2, 3, 4, 4}) : random_tensor(t, {2, 3, 4, 4}, seed++);
      for (int64_t k = 0; t == DType::kDouble && k < x.numel(); ++k) x.mutable_as<double>()[k] = 0.25 * k - 3.0;
      OneNode one("MaxUnpool", {{"x", x}, {"i", ints({2, 3, 4, 4}, at)}}, {t});
      if (with_shape) add_constant(one, ints({4}, {2, 3, 9, 10}), "output_shape");
      one.attr(Attribute::of_ints("kernel_shape", {2, 2}));
      one.attr(Attribute::of_ints("strides", {2, 2}));
      expect_parity(one, 0.0);
    }
  const Tensor boxes = [] {
    Tensor b(DType::kFloat, {4, 4});
    const float v[16] = {0, 0, 9, 7, 2.5f, 3.25f, 6, 4, -3, -2, 4, 5, 1, 1, 11, 9};
    std::copy(v, v + 16, b.mutable_as<float>());
    return b;
  }();
  for (DType t : {DType::kFloat, DType::kFloat16})
    for (const char* mode : {"avg", "max"})
      for (const char* ctm : {"half_pixel", "output_half_pixel"}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + mode + " " + ctm);
        Tensor rois = t == DType::kFloat ? boxes : Tensor(t, {4, 4});
        for (int64_t k = 0; t != DType::kFloat && k < 16; ++k) test::put_float(rois, k, boxes.as<float>()[k]);
        OneNode one("RoiAlign",
                    {{"x", random_tensor(t, {2, 3, 10, 12}, seed++)}, {"rois", rois}, {"batch", ints({4}, {0, 1, 1, 0})}},
                    {t});
        one.attr(Attribute::of_string("mode", mode));
        one.attr(Attribute::of_string("coordinate_transformation_mode", ctm));
        one.attr(Attribute::of_int("output_height", 3));
        one.attr(Attribute::of_int("output_width", 4));
        expect_parity(one, 0.0);
      }
}

// ai.onnx_amp DeformConv (ONNX opset 19) on the device against the CPU in fp32, fp16 and bf16:
// groups and offset groups of 2, strides, pads, a dilation, mask and bias, offsets past the border.
TEST(CudaNormSelectOps, DeformConvMatchesTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 790;
  for (DType t : kFloats) {
    SCOPED_TRACE(dtype_name(t));
    OneNode one("DeformConv",
                {{"x", random_tensor(t, {2, 4, 9, 8}, seed++)},
                 {"w", random_tensor(t, {6, 2, 3, 3}, seed++, -1.0f, 1.0f)},
                 {"offset", random_tensor(t, {2, 36, 5, 6}, seed++)},
                 {"b", random_tensor(t, {6}, seed++)},
                 {"mask", random_tensor(t, {2, 18, 5, 6}, seed++, 0.0f, 1.0f)}},
                {t}, kAmpDomain);
    one.attr(Attribute::of_int("group", 2));
    one.attr(Attribute::of_int("offset_group", 2));
    one.attr(Attribute::of_ints("strides", {2, 1}));
    one.attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
    one.attr(Attribute::of_ints("dilations", {1, 2}));
    expect_parity(one, 1.0);
  }
}

// GridSample and its gradient (ai.onnx_amp GridSampleGrad: dX and dGrid, and each alone) in every
// mode, padding_mode and align_corners, a grid reaching past the map, in the three float types and
// with a float grid for a float16 X: the CPU's results bit for bit.
TEST(CudaNormSelectOps, GridSampleAndItsGradientMatchTheCpuExactly) {
  REQUIRE_GPU();
  uint32_t seed = 790;
  for (DType t : kFloats)
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* padding : {"zeros", "border", "reflection"})
        for (int align = 0; align < 2; ++align) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + mode + " " + padding + " " + std::to_string(align));
          OneNode one("GridSample",
                      {{"x", random_tensor(t, {2, 3, 5, 6}, seed++)}, {"grid", random_tensor(t, {2, 4, 7, 2}, seed++, -1.3f, 1.3f)}},
                      {t});
          one.attr(Attribute::of_string("mode", mode));
          one.attr(Attribute::of_string("padding_mode", padding));
          one.attr(Attribute::of_int("align_corners", align));
          expect_parity(one, 0.0);
          const Tensor grid = one.feeds[1].second;
          OneNode grad("GridSampleGrad",
                       {{"dy", random_tensor(t, {2, 3, 4, 7}, seed++)}, {"x", one.feeds[0].second}, {"grid", grid}}, {t, t},
                       kAmpDomain);
          for (const Attribute& a : one.node->attributes()) grad.attr(a.copy_without_graphs());
          expect_parity(grad, 0.0);
        }
  for (int wanted = 0; wanted < 2; ++wanted) {  // dX alone, dGrid alone (the other output absent)
    OneNode grad("GridSampleGrad",
                 {{"dy", random_tensor(DType::kFloat, {1, 2, 3, 3}, seed++)},
                  {"x", random_tensor(DType::kFloat, {1, 2, 4, 5}, seed++)},
                  {"grid", random_tensor(DType::kFloat, {1, 3, 3, 2}, seed++, -1.3f, 1.3f)}},
                 {}, kAmpDomain);
    Graph& g = *grad.m.graph;
    const std::string name = wanted ? "dgrid" : "dx";
    Node* unnamed = grad.node;
    grad.node = g.add_node("GridSampleGrad", grad.node->inputs(),
                           wanted ? std::vector<std::string>{Graph::kAbsent, name} : std::vector<std::string>{name, Graph::kAbsent},
                           kAmpDomain);
    g.remove_node(unnamed);
    grad.node->output(static_cast<size_t>(wanted))->set_type(ValueType::tensor(DType::kFloat));
    g.add_output(grad.node->output(static_cast<size_t>(wanted)));
    grad.outputs = {name};
    grad.attr(Attribute::of_string("mode", "bicubic"));
    expect_parity(grad, 0.0);
  }
  OneNode mixed("GridSample",
                {{"x", random_tensor(DType::kFloat16, {1, 2, 4, 4}, seed++)},
                 {"grid", random_tensor(DType::kFloat, {1, 3, 3, 2}, seed++, -1.3f, 1.3f)}},
                {DType::kFloat16});
  mixed.attr(Attribute::of_string("mode", "bicubic"));
  expect_parity(mixed, 0.0);
}

// A style-transfer block — Conv, InstanceNormalization, ReLU, global pooling, a classifier — as
// a mixed-precision training step: five steps' losses and the trained parameters (the norm's scale
// and B among them) track the CPU's.
Model instance_norm_block_model() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  uint32_t seed = 800;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    Tensor t = random_tensor(DType::kFloat, std::move(shape), seed++, lo, hi);
    t.name = name;
    return g.add_initializer(std::move(t));
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out, std::vector<int64_t> shape) {
    Node* n = g.add_node(op, in, {out});
    n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of(shape)));
    return n;
  };
  Value* x = g.add_input("input", ValueType::tensor(DType::kFloat, Shape::of({4, 4, 6, 6})));
  // No bias: InstanceNormalization takes each plane's mean away, so a conv bias's gradient is 0 but
  // for rounding, which AdamW's normalised step would turn into full-size steps of noise.
  Node* c = node("Conv", {x, param("conv.weight", {4, 4, 3, 3}, -0.3f, 0.3f)}, "c", {4, 4, 6, 6});
  c->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  Value* normed = node("InstanceNormalization",
                       {c->output(0), param("norm.scale", {4}, 0.5f, 1.5f), param("norm.bias", {4}, -0.5f, 0.5f)},
                       "normed", {4, 4, 6, 6})
                      ->output(0);
  Value* h = node("Relu", {normed}, "h", {4, 4, 6, 6})->output(0);
  Value* pooled = node("GlobalAveragePool", {h}, "pooled", {4, 4, 1, 1})->output(0);
  Value* flat = node("Flatten", {pooled}, "flat", {4, 4})->output(0);
  Node* fc = node("Gemm", {flat, param("fc.weight", {10, 4}, -0.5f, 0.5f)}, "logits", {4, 10});
  fc->set_attr(Attribute::of_int("transB", 1));
  g.add_output(fc->output(0));
  return m;
}

TEST(CudaNormSelectOps, ATrainingStepThroughInstanceNormalizationTracksTheCpu) {
  REQUIRE_GPU();
  for (DType precision : kFloats) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step(instance_norm_block_model(), precision);
    std::vector<std::string> ops;
    for (const Node* n : step.model.graph->nodes()) ops.push_back(n->op_type());
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "InstanceNormalization"), 1);
    test::expect_device_steps_track_cpu(step, random_tensor(DType::kFloat, {4, 4, 6, 6}, 810),
                                        random_tensor(DType::kInt64, {4}, 811, 0, 10), 5, 10.0);
  }
}

// A spatial transformer's sampler: Tanh(Conv) features sampled (GridSample, bicubic with border
// padding) at a grid another Conv predicts, pooled, a classifier. Its mixed-precision training step
// runs GridSample (fp32: it is on the Deny list) and GridSampleGrad on the device: five steps'
// losses and the trained parameters (both convolutions', through dX and through dGrid) track the
// CPU's.
Model grid_sample_block_model() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  uint32_t seed = 820;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    Tensor t = random_tensor(DType::kFloat, std::move(shape), seed++, lo, hi);
    t.name = name;
    return g.add_initializer(std::move(t));
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out, std::vector<int64_t> shape) {
    Node* n = g.add_node(op, in, {out});
    n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of(shape)));
    return n;
  };
  Value* x = g.add_input("input", ValueType::tensor(DType::kFloat, Shape::of({4, 3, 6, 6})));
  Node* c = node("Conv", {x, param("stem.weight", {4, 3, 3, 3}, -0.3f, 0.3f)}, "c", {4, 4, 6, 6});
  c->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  Value* f = node("Tanh", {c->output(0)}, "f", {4, 4, 6, 6})->output(0);
  Node* w = node("Conv", {x, param("where.weight", {2, 3, 3, 3}, -0.3f, 0.3f)}, "w", {4, 2, 3, 3});
  w->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  w->set_attr(Attribute::of_ints("strides", {2, 2}));
  Value* t = node("Tanh", {w->output(0)}, "t", {4, 2, 3, 3})->output(0);
  Node* grid = node("Transpose", {t}, "grid", {4, 3, 3, 2});
  grid->set_attr(Attribute::of_ints("perm", {0, 2, 3, 1}));
  Node* sampled = node("GridSample", {f, grid->output(0)}, "sampled", {4, 4, 3, 3});
  sampled->set_attr(Attribute::of_string("mode", "bicubic"));
  sampled->set_attr(Attribute::of_string("padding_mode", "border"));
  Value* pooled = node("GlobalAveragePool", {sampled->output(0)}, "pooled", {4, 4, 1, 1})->output(0);
  Value* flat = node("Flatten", {pooled}, "flat", {4, 4})->output(0);
  Node* fc = node("Gemm", {flat, param("fc.weight", {10, 4}, -0.5f, 0.5f)}, "logits", {4, 10});
  fc->set_attr(Attribute::of_int("transB", 1));
  g.add_output(fc->output(0));
  return m;
}

TEST(CudaNormSelectOps, ATrainingStepThroughGridSampleTracksTheCpu) {
  REQUIRE_GPU();
  for (DType precision : kFloats) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step(grid_sample_block_model(), precision);
    std::vector<std::string> ops;
    for (const Node* n : step.model.graph->nodes()) ops.push_back(n->op_type());
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "GridSample"), 1);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "GridSampleGrad"), 1);
    test::expect_device_steps_track_cpu(step, random_tensor(DType::kFloat, {4, 3, 6, 6}, 830),
                                        random_tensor(DType::kInt64, {4}, 831, 0, 10), 5, 10.0);
  }
}

#endif

}  // namespace
}  // namespace amp
