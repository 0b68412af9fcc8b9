// The CUDA backend's ScatterND, Einsum, PadGrad and ResizeGrad (issue 16: the zoo's Swin, MaxViT,
// DenseNet/Inception and upsampling heads in training) against the CPU backend, the reference
// (itself checked against numpy/torch in cpu_kernels_test.cc and by finite differences in
// gradient_check_test.cc), in fp32, fp16 and bf16. Without a GPU these run in
// test_cuda_backend_emulated (host stand-ins for the runtime and cuBLASLt, the hand-written
// kernels on the fiber emulator) and skip in test_backends.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/error.h"
#include "graph/half.h"
#include "tests/support/test_support.h"

#if AMP_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "graph/amp_ops.h"
#include "graph/ops/pad.h"
#include "graph/ops/resize.h"
#include "passes/training/training_step.h"
#include "tests/support/cuda_plans.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"
#include "tests/support/random_initializer.h"
#include "tests/support/require_gpu.h"
#endif

namespace amp {
namespace {

#if AMP_HAVE_CUDA

using test::expect_close;
using test::Feeds;
using test::OneNode;
using test::random_tensor;

Tensor ints(std::vector<int64_t> v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t k = 0; k < v.size(); ++k) t.mutable_as<int64_t>()[k] = v[k];
  return t;
}

Tensor floats(std::vector<float> v) {
  Tensor t(DType::kFloat, {static_cast<int64_t>(v.size())});
  for (size_t k = 0; k < v.size(); ++k) t.mutable_as<float>()[k] = v[k];
  return t;
}

// random_tensor's values, in any float type (double too).
Tensor random_values(DType t, const std::vector<int64_t>& dims, uint32_t seed) {
  if (t != DType::kDouble) return random_tensor(t, dims, seed);
  const Tensor f = random_tensor(DType::kFloat, dims, seed);
  Tensor d(DType::kDouble, dims);
  for (int64_t k = 0; k < f.numel(); ++k) d.mutable_as<double>()[k] = f.as<float>()[k];
  return d;
}

// The CPU's results and the device's (two runs: the second replays a captured graph).
void expect_parity(const OneNode& one, double tol_scale) {
  const std::vector<Tensor> cpu = make_backend("cpu")->compile(one.m, {})->run(one.feeds, one.outputs);
  auto exe = make_backend("cuda")->compile(one.m, {});
  std::vector<Tensor> gpu;
  for (int r = 0; r < 2; ++r) gpu = exe->run(one.feeds, one.outputs);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) expect_close(gpu[k], cpu[k], one.outputs[k], tol_scale);
}

constexpr DType kFloats[] = {DType::kFloat, DType::kFloat16, DType::kBFloat16};

TEST(CudaZooOps, TheDeviceRunsThem) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
  const cuda::CudaBackend b;
  for (const auto& [domain, op] : std::vector<std::pair<std::string, std::string>>{
           {"", "ScatterND"}, {"", "Einsum"}, {kAmpDomain, "PadGrad"}, {kAmpDomain, "ResizeGrad"}}) {
    Node* n = g.add_node(op, {x}, std::vector<std::string>{op + "_out"}, domain);
    EXPECT_EQ(b.unsupported_reason(*n), "") << op;
  }
}

// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and GlobalMaxPool run as ReducePlans
// (reduction_ops.cc) and match the CPU, over an axis of extent 1 too (a copy pass: for these kinds
// not an alias of the input); ReduceLogSumExp, InstanceNormalization and MeanVarianceNormalization
// run too (cuda_norm_select_ops_test.cc compares them); the integer ops of quantized models have
// no device kernel and are refused by name.
TEST(CudaZooOps, NormLikeReductionsAndGlobalMaxPoolMatchTheCpuTheRestAreRefusedByName) {
  {
    Model m;
    Graph& g = *m.graph;
    Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 2})));
    const cuda::CudaBackend b;
    // the integer ops of quantized models, and the random generators (new draws every run: never
    // computed on the host while planning)
    for (const char* op : {"RandomNormal", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "MatMulInteger",
                           "ConvInteger", "QLinearMatMul", "QLinearConv", "DynamicQuantizeLinear"}) {
      Node* n = g.add_node(op, {x}, std::vector<std::string>{std::string(op) + "_out"});
      EXPECT_NE(b.unsupported_reason(*n).find(op), std::string::npos) << op << ": " << b.unsupported_reason(*n);
    }
    for (const char* op : {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "GlobalMaxPool", "ReduceLogSumExp",
                           "InstanceNormalization", "MeanVarianceNormalization"}) {
      Node* n = g.add_node(op, {x}, std::vector<std::string>{std::string(op) + "_out"});
      EXPECT_EQ(b.unsupported_reason(*n), "") << op;
    }
  }
  REQUIRE_GPU();
  uint32_t seed = 400;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 40, 5}, {0, 2}}, {{6, 300, 5}, {1}}, {{3, 1, 5}, {1}}, {{4, 6}, {}}};
  for (DType t : kFloats) {
    for (const char* op : {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum"})
      for (const auto& [dims, axes] : cases) {
        OneNode one(op, {{"x", random_tensor(t, dims, seed++, 0.1f, 2.0f)}}, {t});
        if (!axes.empty()) one.attr(Attribute::of_ints("axes", axes));
        expect_parity(one, 10.0);
      }
    expect_parity(OneNode("GlobalMaxPool", {{"x", random_tensor(t, {2, 3, 5, 7}, seed++)}}, {t}), 0.0);
  }
}

// ScatterND with duplicate-free index tuples of every length (whole rows, a row of a matrix,
// single elements) in the float types, double and integer and bool types; repeated tuples keep the last write, as the
// CPU's one-at-a-time loop does; add and mul apply repeated tuples in order; opset 18's max and min
// (ai.onnx_amp ScatterND) keep the larger or smaller, a repeated tuple included. Bit for bit.
TEST(CudaZooOps, ScatterNDMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> data, indices;
    std::vector<int64_t> index_values;
    const char* reduction;
  };
  const Case cases[] = {
      {{5, 3, 4}, {2, 1}, {3, -5}, "none"},                                  // k = 1: rows, one from the end
      {{5, 3, 4}, {2, 2, 2}, {0, 1, 4, 2, 2, 0, 1, 1}, "none"},               // k = 2, indices of rank 3
      {{5, 3, 4}, {3, 3}, {4, 2, 3, 0, 0, 0, 2, 1, 1}, "none"},               // k = 3: elements
      {{5, 3, 4}, {4, 1}, {1, 3, 1, 0}, "none"},                              // a repeated row: the last wins
      {{5, 3, 4}, {4, 2}, {1, 2, 0, 0, 1, 2, 4, 1}, "add"},                   // repeated (1, 2), in order
      {{5, 3, 4}, {3, 1}, {2, 2, 4}, "mul"},
      {{5, 3, 4}, {4, 2}, {1, 2, 0, 0, 1, 2, 4, 1}, "max"},                   // opset 18's (ai.onnx_amp)
      {{5, 3, 4}, {3, 3}, {4, 2, 3, 4, 2, 3, 2, 1, 1}, "min"},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    std::vector<DType> types(std::begin(kFloats), std::end(kFloats));
    types.push_back(DType::kDouble);
    if (std::string(c.reduction) == "none") types.insert(types.end(), {DType::kInt64, DType::kBool});
    if (std::string(c.reduction) == "add") types.push_back(DType::kInt32);
    const bool opset18 = std::string(c.reduction) == "max" || std::string(c.reduction) == "min";
    if (opset18) types.insert(types.end(), {DType::kInt64, DType::kBool});
    for (DType t : types) {
      SCOPED_TRACE(std::string(c.reduction) + " " + std::string(dtype_name(t)) + " indices " + std::to_string(c.indices.size()) +
                   "-d, k " + std::to_string(c.indices.back()));
      Tensor idx(DType::kInt64, c.indices);
      ASSERT_EQ(static_cast<size_t>(idx.numel()), c.index_values.size());
      for (size_t k = 0; k < c.index_values.size(); ++k) idx.mutable_as<int64_t>()[k] = c.index_values[k];
      std::vector<int64_t> updates(c.indices.begin(), c.indices.end() - 1);
      updates.insert(updates.end(), c.data.begin() + c.indices.back(), c.data.end());
      const float lo = t == DType::kInt64 || t == DType::kInt32 ? -50.0f : -2.0f;
      const float hi = -lo;
      auto values = [&](const std::vector<int64_t>& dims) {
        return t == DType::kDouble ? random_values(t, dims, seed++) : random_tensor(t, dims, seed++, lo, hi);
      };
      Feeds in = {{"x", values(c.data)}, {"i", idx}, {"u", values(updates)}};
      OneNode one("ScatterND", in, {t}, opset18 ? kAmpDomain : "");
      one.node->set_attr(Attribute::of_string("reduction", c.reduction));
      expect_parity(one, 0.0);
    }
  }
  // More (tuple, element) pairs than one launch's threads (the emulated device's 4 SMs give 8192),
  // so the grid-stride loops go round; 3000 rows of 3 drawn from 100 with repeats, the last of
  // each repeated row winning.
  std::mt19937 rng(190);
  Tensor idx(DType::kInt64, {3000, 1});
  for (int64_t k = 0; k < 3000; ++k) idx.mutable_as<int64_t>()[k] = static_cast<int64_t>(rng() % 100) - 50;
  for (DType t : kFloats) {
    SCOPED_TRACE(std::string("3000 repeated rows ") + std::string(dtype_name(t)));
    OneNode one("ScatterND", {{"x", random_tensor(t, {100, 3}, 191)}, {"i", idx}, {"u", random_tensor(t, {3000, 3}, 192)}}, {t});
    expect_parity(one, 0.0);
  }
}

// MaxViT's two attention products and the two gradients autodiff makes of each, as cuBLASLt
// products (fp32 accumulation on both sides); then equations that need the operands or the
// output transposed around the product, and one operand transposed (a copy); then equations
// that are neither, refused while the model is compiled with the node and the equation named.
TEST(CudaZooOps, EinsumMatchesTheCpuAndRefusesWhatIsNotOneProduct) {
  REQUIRE_GPU();
  struct Case {
    const char* equation;
    std::vector<int64_t> a, b;
  };
  // B G H I J D = 2 3 2 5 4 8.
  const Case cases[] = {
      {"BGHID,BGHJD->BGHIJ", {2, 3, 2, 5, 8}, {2, 3, 2, 4, 8}},  // scores = q k^T
      {"BGHIJ,BGHJD->BGHID", {2, 3, 2, 5, 4}, {2, 3, 2, 4, 8}},  // attention @ v
      {"BGHIJ,BGHID->BGHJD", {2, 3, 2, 5, 4}, {2, 3, 2, 5, 8}},  // dK of the scores, dV of attention @ v
      {"BGHID,BGHIJ->BGHJD", {2, 3, 2, 5, 8}, {2, 3, 2, 5, 4}},  // the same with the operands swapped
      {"B G H I D, B G H J D -> B G H I J", {1, 2, 1, 3, 4}, {1, 2, 1, 5, 4}},  // torch's spelling
      {"bij,bjk->bki", {3, 4, 5}, {3, 5, 6}},                   // the output transposed
      {"jbi,kjb->bik", {5, 3, 4}, {6, 5, 3}},                   // both operands rearranged
      {"ij,jk->ik", {7, 9}, {9, 6}},                            // no batch
      {"i,j->ij", {7}, {6}},                                    // nothing summed: an outer product
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    for (DType t : kFloats) {
      SCOPED_TRACE(std::string(c.equation) + " " + std::string(dtype_name(t)));
      OneNode one("Einsum", {{"a", random_tensor(t, c.a, seed++)}, {"b", random_tensor(t, c.b, seed++)}}, {t});
      one.node->set_attr(Attribute::of_string("equation", c.equation));
      one.node->name = "attn";
      expect_parity(one, 4.0);
    }
  }
  // One operand transposed: a copy, in double too.
  for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
    SCOPED_TRACE(std::string("abc->cab ") + std::string(dtype_name(t)));
    OneNode one("Einsum", {{"a", random_values(t, {2, 3, 4}, seed++)}}, {t});
    one.node->set_attr(Attribute::of_string("equation", "abc->cab"));
    expect_parity(one, 0.0);
  }
  struct Refused {
    const char* equation;
    std::vector<std::vector<int64_t>> dims;
    const char* why;
  };
  const Refused refused[] = {{"ij,jk,k->i", {{3, 4}, {4, 5}, {5}}, "3 operands"},
                             {"ii,ij->ij", {{4, 4}, {4, 5}}, "repeats"},
                             {"ij,jk->i", {{3, 4}, {4, 5}}, "summed within one operand"},
                             {"abc->ca", {{2, 3, 4}}, "one operand ('abc') that is not only transposed"},
                             {"ii->i", {{4, 4}}, "one operand ('ii') that is not only transposed"}};
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.equation);
    Feeds in;
    for (size_t k = 0; k < r.dims.size(); ++k)
      in.push_back({"x" + std::to_string(k), random_tensor(DType::kFloat, r.dims[k], 300)});
    OneNode one("Einsum", in, {DType::kFloat});
    one.node->set_attr(Attribute::of_string("equation", r.equation));
    one.node->name = "mix";
    one.run_cpu();  // the CPU kernel takes it
    try {
      make_backend("cuda")->compile(one.m, {})->run(one.feeds, one.outputs);
      ADD_FAILURE() << r.equation << " ran on the device";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("mix (Einsum)"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("unsupported Einsum equation '") + r.equation + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(r.why), std::string::npos) << what;
    }
  }
}

// PadGrad in every mode with asymmetric amounts, negative ones (crops) for constant and with axes:
// every dY element summed into the element it was read from (edge and reflect read some many
// times). The CPU sums in fp64 and the device in fp32, each rounding once; in double both sum in
// fp64 in dY's order, so the results are the CPU's exactly (expect_close has no tolerance for
// double).
TEST(CudaZooOps, PadGradMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    const char* mode;
    std::vector<int64_t> shape, pads, axes;
  };
  const Case cases[] = {
      {"reflect", {2, 3, 5, 6}, {0, 0, 2, 3, 0, 0, 4, 1}, {}},
      {"reflect", {2, 3, 5, 6}, {0, 1, 4, 0, 0, 2, 1, 5}, {}},  // reflect by up to the extent - 1
      {"edge", {2, 3, 5, 6}, {1, 0, 3, 2, 0, 2, 1, 4}, {}},
      {"wrap", {2, 3, 5, 6}, {0, 1, 2, 3, 0, 2, 4, 1}, {}},
      {"wrap", {2, 3, 5, 6}, {6, 1, 5, 0}, {3, -3}},           // axes; wrap by a whole extent
      {"constant", {2, 3, 5, 6}, {0, -1, 2, -2, 1, 0, -1, 3}, {}},  // crops and pads
      {"edge", {4, 7}, {3, 0, 1, 5}, {}},
      {"reflect", {2, 8, 24, 30}, {0, 0, 3, 1, 0, 0, 2, 4}, {}},  // more elements than a launch's threads
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      SCOPED_TRACE(std::string(c.mode) + " " + std::string(dtype_name(t)));
      const PadAmounts p = pad_amounts(c.pads, c.axes, c.shape.size());
      std::vector<int64_t> padded;
      for (size_t a = 0; a < c.shape.size(); ++a) padded.push_back(c.shape[a] + p.begin[a] + p.end[a]);
      Feeds in = {{"dy", random_values(t, padded, seed++)}, {"p", ints(c.pads)}, {"s", ints(c.shape)}};
      if (!c.axes.empty()) in.push_back({"ax", ints(c.axes)});
      OneNode one("PadGrad", in, {t}, kAmpDomain);
      one.node->set_attr(Attribute::of_string("mode", c.mode));
      expect_parity(one, 1.0);
    }
  }
}

// ResizeGrad as autodiff emits it for Resize in the modes torch exports, with scales that do not
// divide the input (1.5, 2.5, 0.6: output extents floored) and with sizes (no scales input): each
// dY element times its interpolation weights summed into the elements it read. In double, exactly
// the CPU's (the same weight products and sums in the same order).
TEST(CudaZooOps, ResizeGradMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    const char* mode;
    const char* coord;
    const char* nearest;
    std::vector<int64_t> shape;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
  };
  const Case cases[] = {
      {"nearest", "asymmetric", "floor", {2, 3, 4, 5}, {1, 1, 2, 2}, {}},
      {"nearest", "asymmetric", "floor", {2, 3, 5, 7}, {1, 1, 1.5f, 2.5f}, {}},
      {"nearest", "half_pixel", "round_prefer_floor", {2, 3, 5, 7}, {}, {2, 3, 8, 3}},
      {"linear", "half_pixel", "floor", {2, 3, 5, 7}, {1, 1, 1.5f, 2.5f}, {}},
      {"linear", "pytorch_half_pixel", "floor", {2, 3, 5, 7}, {}, {2, 3, 9, 4}},
      {"linear", "align_corners", "floor", {2, 3, 5, 7}, {}, {2, 3, 11, 13}},
      {"linear", "asymmetric", "floor", {2, 3, 5, 7}, {1, 1, 0.6f, 1.5f}, {}},
      {"linear", "half_pixel", "floor", {2, 4, 3, 5}, {1, 1, 2.5f, 2.5f, 1.5f}, {}},  // trilinear
      {"linear", "pytorch_half_pixel", "floor", {2, 8, 24, 30}, {1, 1, 2.5f, 1.5f}, {}},  // > 8192 elements
  };
  uint32_t seed = 500;
  for (Case c : cases) {
    if (c.scales.size() == 5) c.shape.push_back(4);  // the 3-D case
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      SCOPED_TRACE(std::string(c.mode) + " " + c.coord + " " + std::string(dtype_name(t)));
      const std::vector<int64_t> out = resize_output_dims(c.shape, c.scales, c.sizes);
      Feeds in = {{"dy", random_values(t, out, seed++)}, {"s", ints(c.shape)}};
      if (!c.scales.empty()) in.push_back({"scales", floats(c.scales)});
      OneNode one("ResizeGrad", in, {t}, kAmpDomain);
      one.node->set_attr(Attribute::of_string("mode", c.mode));
      one.node->set_attr(Attribute::of_string("coordinate_transformation_mode", c.coord));
      one.node->set_attr(Attribute::of_string("nearest_mode", c.nearest));
      expect_parity(one, 1.0);
    }
  }
}

// Resize in cubic mode and its gradient (cubic_coeff_a, exclude_outside; scales and sizes; up and
// down; a 3-D input) through the per-axis read lists: the CPU's results within the device's fp32
// sums' rounding (the CPU sums cubic taps in fp64, nested by axis); double within 1e-12, as the
// device multiplies each tap's weights first.
TEST(CudaZooOps, ResizeCubicAndItsGradientMatchTheCpu) {
  REQUIRE_GPU();
  auto expect_like_cpu = [](const OneNode& one, DType t) {
    if (t != DType::kDouble) return expect_parity(one, 1.0);
    const Tensor cpu = make_backend("cpu")->compile(one.m, {})->run(one.feeds, one.outputs)[0];
    const Tensor gpu = make_backend("cuda")->compile(one.m, {})->run(one.feeds, one.outputs)[0];
    ASSERT_EQ(gpu.dims, cpu.dims);
    for (int64_t k = 0; k < cpu.numel(); ++k)
      EXPECT_NEAR(gpu.as<double>()[k], cpu.as<double>()[k], 1e-12 * (1 + std::fabs(cpu.as<double>()[k]))) << k;
  };
  struct Case {
    const char* coord;
    std::vector<int64_t> shape;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
    float a;
    int exclude;
  };
  const Case cases[] = {
      {"half_pixel", {2, 3, 5, 6}, {1, 1, 2, 2}, {}, -0.75f, 0},
      {"align_corners", {2, 3, 5, 6}, {}, {2, 3, 9, 4}, -0.75f, 0},
      {"pytorch_half_pixel", {1, 2, 6, 5}, {}, {1, 2, 3, 7}, -0.5f, 1},
      {"asymmetric", {3, 4, 5}, {1, 1.5f, 0.6f}, {}, -0.75f, 0},
  };
  uint32_t seed = 520;
  for (const Case& c : cases)
    for (DType t : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
      SCOPED_TRACE(std::string(c.coord) + " " + std::string(dtype_name(t)));
      auto attrs = [&](OneNode& one) {
        one.node->set_attr(Attribute::of_string("mode", "cubic"));
        one.node->set_attr(Attribute::of_string("coordinate_transformation_mode", c.coord));
        one.node->set_attr(Attribute::of_float("cubic_coeff_a", c.a));
        one.node->set_attr(Attribute::of_int("exclude_outside", c.exclude));
      };
      Feeds in = {{"x", random_values(t, c.shape, seed++)}, {"", Tensor()}};
      if (c.sizes.empty()) {
        in.push_back({"scales", floats(c.scales)});
      } else {
        in.push_back({"", Tensor()});
        in.push_back({"sizes", ints(c.sizes)});
      }
      OneNode forward("Resize", in, {t});
      attrs(forward);
      expect_like_cpu(forward, t);
      const std::vector<int64_t> out = resize_output_dims(c.shape, c.scales, c.sizes);
      Feeds grad_in = {{"dy", random_values(t, out, seed++)}, {"s", ints(c.shape)}};
      if (!c.scales.empty()) grad_in.push_back({"scales", floats(c.scales)});
      OneNode backward("ResizeGrad", grad_in, {t}, kAmpDomain);
      attrs(backward);
      expect_like_cpu(backward, t);
    }
}

// A block with the zoo's ops in it, on [4, 4, 6, 6] inputs: Conv+bias -> Relu -> reflect Pad
// (asymmetric: [4, 4, 9, 9]) -> bilinear Resize by 1.5 as torch exports it (pytorch_half_pixel:
// [4, 4, 13, 13]) -> GlobalAveragePool -> Flatten -> Einsum "nc,kc->nk" with a weight (a Linear
// written as MaxViT writes its products) -> logits [4, 10]. Its training step runs PadGrad,
// ResizeGrad and the Einsum's two gradient Einsums ("nk,kc->nc", "nk,nc->kc") on the device.
Model zoo_ops_block_model() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  uint32_t seed = 600;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, float range) {
    return test::random_initializer(g, name, std::move(shape), seed++, range);
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
  Value* x = g.add_input("input", ValueType::tensor(DType::kFloat, Shape::of({4, 4, 6, 6})));
  Node* c = node("Conv", {x, param("conv.weight", {4, 4, 3, 3}, 0.3f), param("conv.bias", {4}, 0.3f)}, "c", {4, 4, 6, 6});
  c->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  Value* h = node("Relu", {c->output(0)}, "h", {4, 4, 6, 6})->output(0);
  Node* pad = node("Pad", {h, constant(ints({0, 0, 1, 2, 0, 0, 2, 1}), "pads")}, "padded", {4, 4, 9, 9});
  pad->set_attr(Attribute::of_string("mode", "reflect"));
  Node* up = node("Resize", {pad->output(0), nullptr, constant(floats({1, 1, 1.5f, 1.5f}), "scales")}, "up", {4, 4, 13, 13});
  up->set_attr(Attribute::of_string("mode", "linear"));
  up->set_attr(Attribute::of_string("coordinate_transformation_mode", "pytorch_half_pixel"));
  Value* pooled = node("GlobalAveragePool", {up->output(0)}, "pooled", {4, 4, 1, 1})->output(0);
  Value* flat = node("Flatten", {pooled}, "flat", {4, 4})->output(0);
  Node* fc = node("Einsum", {flat, param("fc.weight", {10, 4}, 0.5f)}, "logits", {4, 10});
  fc->set_attr(Attribute::of_string("equation", "nc,kc->nk"));
  g.add_output(fc->output(0));
  return m;
}

// That block's training step in fp32, fp16 and bf16: five steps' losses and every parameter
// afterwards track the CPU's (expect_close, x10).
TEST(CudaZooOps, ATrainingStepThroughPadResizeAndEinsumTracksTheCpu) {
  REQUIRE_GPU();
  for (DType precision : kFloats) {
    SCOPED_TRACE(dtype_name(precision));
    TrainingStep step = test::mixed_precision_step(zoo_ops_block_model(), precision);
    std::vector<std::string> ops;
    for (const Node* n : step.model.graph->nodes()) ops.push_back(n->op_type());
    for (const char* op : {"PadGrad", "ResizeGrad"}) EXPECT_EQ(std::count(ops.begin(), ops.end(), op), 1) << op;
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Einsum"), 3) << "the product and its two gradients";
    // Resize's scales decide a shape: a constant of the step, not a trained weight (nor state).
    EXPECT_EQ(std::vector<std::string>(step.params), (std::vector<std::string>{"conv.weight", "conv.bias", "fc.weight"}));
    test::expect_device_steps_track_cpu(step, random_tensor(DType::kFloat, {4, 4, 6, 6}, 610),
                                        random_tensor(DType::kInt64, {4}, 611, 0, 10), 5, 10.0);
  }
}

#endif

}  // namespace
}  // namespace amp
