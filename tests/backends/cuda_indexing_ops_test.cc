// The CUDA backend's CumSum, GatherElements, ScatterElements, GatherND, ReverseSequence and
// EyeLike (indexing_ops.cc; EyeLike reads only its input's dims and runs on the host while
// planning) against the CPU backend, the reference, bit for bit in every element type each takes,
// and a training step through CumSum and GatherElements, whose gradients are a reversed CumSum
// and a ScatterElements with reduction add. Without a GPU these run in test_cuda_backend_emulated
// (host stand-ins for the runtime, the hand-written kernels on the fiber emulator) and skip in
// test_backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/half.h"
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

constexpr DType kAllTypes[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt8,
                               DType::kInt16, DType::kInt32,   DType::kInt64,    DType::kUInt8,  DType::kUInt16,
                               DType::kUInt32, DType::kUInt64, DType::kBool};

// Uniform in [-spread, spread) in any element type: floats rounded to it, integers floored
// (wrapping into the unsigned types), bools true for > 0.
Tensor values(DType t, const std::vector<int64_t>& dims, uint32_t seed, float spread = 20.0f) {
  if (t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kBool)
    return random_tensor(t, dims, seed, -spread, spread);
  const Tensor f = random_tensor(DType::kFloat, dims, seed, -spread, spread);
  Tensor x(t, dims);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = f.as<float>()[k];
    const int64_t i = static_cast<int64_t>(std::floor(v));
    switch (t) {
      case DType::kDouble: x.mutable_as<double>()[k] = static_cast<double>(v) / 3.0; break;
      case DType::kInt8: x.mutable_as<int8_t>()[k] = static_cast<int8_t>(i); break;
      case DType::kInt16: x.mutable_as<int16_t>()[k] = static_cast<int16_t>(i); break;
      case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(i); break;
      case DType::kInt64: x.mutable_as<int64_t>()[k] = i; break;
      case DType::kUInt8: x.mutable_as<uint8_t>()[k] = static_cast<uint8_t>(i); break;
      case DType::kUInt16: x.mutable_as<uint16_t>()[k] = static_cast<uint16_t>(i); break;
      case DType::kUInt32: x.mutable_as<uint32_t>()[k] = static_cast<uint32_t>(i); break;
      case DType::kUInt64: x.mutable_as<uint64_t>()[k] = static_cast<uint64_t>(i); break;
      default: ADD_FAILURE() << "no values for " << dtype_name(t);
    }
  }
  return x;
}

Tensor indices(const std::vector<int64_t>& dims, uint32_t seed, int64_t lo, int64_t hi) {
  Tensor x(DType::kInt64, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  for (int64_t k = 0; k < x.numel(); ++k) x.mutable_as<int64_t>()[k] = u(rng);
  return x;
}

Tensor scalar(int64_t v) {
  Tensor t(DType::kInt64, {});
  t.mutable_as<int64_t>()[0] = v;
  return t;
}

// The CPU's results and the device's (two runs: the second replays a captured graph), the same
// bit for bit.
void expect_same(const OneNode& one) {
  const std::vector<Tensor> cpu = make_backend("cpu")->compile(one.m, {})->run(one.feeds, one.outputs);
  auto exe = make_backend("cuda")->compile(one.m, {});
  std::vector<Tensor> gpu;
  for (int r = 0; r < 2; ++r) gpu = exe->run(one.feeds, one.outputs);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) {
    EXPECT_TRUE(gpu[k].same_contents(cpu[k])) << one.outputs[k] << " differs from the CPU's";
    if (!gpu[k].same_contents(cpu[k])) expect_close(gpu[k], cpu[k], one.outputs[k], 0.0);  // says where
  }
}

TEST(CudaIndexingOps, TheDeviceRunsThem) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
  const cuda::CudaBackend b;
  for (const char* op : {"CumSum", "GatherElements", "ScatterElements", "GatherND", "ReverseSequence", "EyeLike"}) {
    Node* n = g.add_node(op, {x}, std::vector<std::string>{std::string(op) + "_out"});
    EXPECT_EQ(b.unsupported_reason(*n), "") << op;
  }
}

// Inclusive and exclusive, forward and reversed, along each axis, in every type the CPU sums; the
// axis fed (read while planning: a new axis is a new plan) or a constant.
TEST(CudaIndexingOps, CumSumMatchesTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 100;
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32, DType::kInt64,
                  DType::kUInt32, DType::kUInt64})
    for (int64_t axis : {0, 1, -1})
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(axis) + " exclusive " +
                       std::to_string(exclusive) + " reverse " + std::to_string(reverse));
          OneNode one("CumSum", {{"x", values(t, {3, 40, 5}, seed++)}, {"axis", scalar(axis)}}, {t});
          one.attr(Attribute::of_int("exclusive", exclusive));
          one.attr(Attribute::of_int("reverse", reverse));
          expect_same(one);
        }
  // One executable, two axes fed: a plan each.
  OneNode one("CumSum", {{"x", values(DType::kFloat, {4, 6}, seed++)}, {"axis", scalar(0)}}, {DType::kFloat});
  auto exe = make_backend("cuda")->compile(one.m, {});
  auto cpu = make_backend("cpu")->compile(one.m, {});
  for (int64_t axis : {0, 1, -2}) {
    Feeds feeds = {one.feeds[0], {"axis", scalar(axis)}};
    EXPECT_TRUE(exe->run(feeds, one.outputs)[0].same_contents(cpu->run(feeds, one.outputs)[0])) << axis;
  }
  // The axis a constant of the model: an initializer read while planning, not device state.
  Tensor axis = scalar(1);
  axis.name = "axis";
  one.m.graph->add_initializer(std::move(axis));
  one.feeds.resize(1);
  expect_same(one);
}

// An axis computed on the device (here from a weight, which is device state) is refused while
// compiling. One computed from feeds alone is not: planning computes it on the host.
TEST(CudaIndexingOps, CumSumRefusesAnAxisComputedOnTheDevice) {
  REQUIRE_GPU();
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({3, 4})));
  Tensor w = random_tensor(DType::kFloat, {3, 4}, 4);
  w.name = "w";
  Node* arg = g.add_node("ArgMax", {g.add_initializer(std::move(w))}, {"computed_axis"});
  arg->set_attr(Attribute::of_int("keepdims", 0));
  arg->set_attr(Attribute::of_int("axis", 0));
  Node* flat = g.add_node("ReduceMin", {arg->output(0)}, {"axis_scalar"});
  flat->set_attr(Attribute::of_int("keepdims", 0));
  Node* cs = g.add_node("CumSum", {x, flat->output(0)}, {"y"});
  cs->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of({3, 4})));
  g.add_output(cs->output(0));
  try {
    make_backend("cuda")->compile(m, {})->run({{"x", random_tensor(DType::kFloat, {3, 4}, 5)}}, {"y"});
    ADD_FAILURE() << "compiled";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("computed on the device"), std::string::npos) << e.what();
  }
}

// Along the first, a middle and the last axis, indices smaller than the data off the axis and
// longer along it (so they repeat), negative ones; ScatterElements under none, add and mul, and
// opset 18's max and min (ai.onnx_amp).
TEST(CudaIndexingOps, GatherElementsAndScatterElementsMatchTheCpu) {
  REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> data, idx;
    int64_t axis;
  };
  const Case cases[] = {{{4, 5, 6}, {4, 3, 6}, 1}, {{4, 5, 6}, {2, 9, 3}, -2}, {{4, 5, 6}, {4, 5, 8}, -1},
                        {{4, 5, 6}, {6, 5, 6}, 0}, {{300, 3}, {300, 7}, 1}};
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const int64_t rank = static_cast<int64_t>(c.data.size());
    const int64_t extent = c.data[static_cast<size_t>(c.axis < 0 ? c.axis + rank : c.axis)];
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(c.axis));
      const Tensor data = values(t, c.data, seed++);
      const Tensor idx = indices(c.idx, seed++, -extent, extent);
      OneNode gather("GatherElements", {{"data", data}, {"indices", idx}}, {t});
      gather.attr(Attribute::of_int("axis", c.axis));
      expect_same(gather);
      for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
        SCOPED_TRACE(reduction);
        const float spread = std::string(reduction) == "mul" ? 2.0f : 20.0f;
        // max and min came with opset 18: the import carries such a node into ai.onnx_amp.
        const bool opset18 = std::string(reduction) == "max" || std::string(reduction) == "min";
        OneNode scatter("ScatterElements",
                        {{"data", values(t, c.data, seed++, spread)}, {"indices", idx}, {"updates", values(t, c.idx, seed++, spread)}},
                        {t}, opset18 ? kAmpDomain : "");
        scatter.attr(Attribute::of_int("axis", c.axis));
        scatter.attr(Attribute::of_string("reduction", reduction));
        expect_same(scatter);
      }
    }
  }
}

TEST(CudaIndexingOps, GatherNDMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> data, idx;
    int64_t batch_dims;
  };
  const Case cases[] = {{{5, 4, 3}, {2, 1}, 0}, {{5, 4, 3}, {2, 3, 2}, 0}, {{5, 4, 3}, {7, 3}, 0},
                        {{3, 4, 5}, {3, 2, 1}, 1}, {{2, 3, 4, 5}, {2, 3, 6, 2}, 2}};
  uint32_t seed = 300;
  for (const Case& c : cases)
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " batch_dims " + std::to_string(c.batch_dims));
      Tensor idx = indices(c.idx, seed++, 0, 1);
      std::mt19937 rng(seed++);
      const int64_t k = c.idx.back();
      for (int64_t e = 0; e < idx.numel(); ++e) {
        const int64_t dim = c.data[static_cast<size_t>(c.batch_dims + e % k)];
        idx.mutable_as<int64_t>()[e] = std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng);
      }
      OneNode one("GatherND", {{"data", values(t, c.data, seed++)}, {"indices", idx}}, {t});
      one.attr(Attribute::of_int("batch_dims", c.batch_dims));
      expect_same(one);
    }
}

TEST(CudaIndexingOps, ReverseSequenceMatchesTheCpu) {
  REQUIRE_GPU();
  uint32_t seed = 400;
  for (int64_t time_axis : {0, 1})
    for (DType t : kAllTypes) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " time_axis " + std::to_string(time_axis));
      const std::vector<int64_t> dims = time_axis == 0 ? std::vector<int64_t>{7, 4, 3} : std::vector<int64_t>{4, 7, 3};
      OneNode one("ReverseSequence", {{"x", values(t, dims, seed++)}, {"lens", indices({4}, seed++, 0, 8)}}, {t});
      one.attr(Attribute::of_int("time_axis", time_axis));
      one.attr(Attribute::of_int("batch_axis", 1 - time_axis));
      expect_same(one);
    }
}

// EyeLike reads only its input's dims: computed on the host while planning, in any output type.
TEST(CudaIndexingOps, EyeLikeMatchesTheCpu) {
  REQUIRE_GPU();
  for (int64_t k : {0, 2, -1, 9})
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kInt64, DType::kBool}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " k " + std::to_string(k));
      OneNode one("EyeLike", {{"x", values(DType::kFloat, {4, 6}, 7)}}, {t});
      one.attr(Attribute::of_int("k", k));
      one.attr(Attribute::of_int("dtype", static_cast<int64_t>(t)));
      expect_same(one);
    }
}

// [4, 6] -> MatMul [6, 8] -> CumSum along the features (position ids' running sum, as transformer
// exports write them) -> GatherElements of 5 of the 8 (repeated, one from the back) per row ->
// MatMul [5, 10] -> logits. Its step runs a reversed CumSum and a ScatterElements with reduction
// add on the device.
Model indexing_block_model() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  uint32_t seed = 700;
  auto param = [&](const std::string& name, std::vector<int64_t> shape) {
    Tensor t = random_tensor(DType::kFloat, std::move(shape), seed++, -0.4f, 0.4f);
    t.name = name;
    return g.add_initializer(std::move(t));
  };
  auto constant = [&](Tensor t, const std::string& name) {
    t.name = name;
    return g.add_initializer(std::move(t));
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out, std::vector<int64_t> shape) {
    Node* n = g.add_node(op, in, {out});
    n->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of(shape)));
    return n;
  };
  Value* x = g.add_input("input", ValueType::tensor(DType::kFloat, Shape::of({4, 6})));
  Value* h = node("MatMul", {x, param("w1", {6, 8})}, "h", {4, 8})->output(0);
  Value* c = node("CumSum", {h, constant(scalar(1), "cumsum_axis")}, "c", {4, 8})->output(0);
  Tensor idx(DType::kInt64, {4, 5});
  const int64_t picks[] = {0, 3, 3, 7, -1, 1, 1, 2, 5, 6, 4, 0, -8, 2, 2, 7, 6, 5, 4, 3};
  for (int k = 0; k < 20; ++k) idx.mutable_as<int64_t>()[k] = picks[k];
  Node* ge = node("GatherElements", {c, constant(std::move(idx), "picks")}, "picked", {4, 5});
  ge->set_attr(Attribute::of_int("axis", 1));
  Node* fc = node("MatMul", {ge->output(0), param("w2", {5, 10})}, "logits", {4, 10});
  g.add_output(fc->output(0));
  return m;
}

// That block's training step in fp32, fp16 and bf16: five steps' losses and the parameters
// afterwards track the CPU's (expect_close, x10).
TEST(CudaIndexingOps, ATrainingStepThroughCumSumAndGatherElementsTracksTheCpu) {
  REQUIRE_GPU();
  for (DType precision : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step(indexing_block_model(), precision);
    std::vector<std::string> ops;
    for (const Node* n : step.model.graph->nodes()) ops.push_back(n->op_type());
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "CumSum"), 2) << "the sum and its reversed gradient";
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ScatterElements"), 1) << "GatherElements' gradient";
    test::expect_device_steps_track_cpu(step, random_tensor(DType::kFloat, {4, 6}, 710),
                                        random_tensor(DType::kInt64, {4}, 711, 0, 10), 5, 10.0);
  }
}

#endif

}  // namespace
}  // namespace amp
