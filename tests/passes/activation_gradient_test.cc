// Gradient rules against PyTorch's autograd (tests/backends/kernel_reference.py): the backward graph
// autodiff builds for one node, dX from dY, run on the CPU backend in float32 and float64 (the
// same operations as PyTorch's: equal to the last bit) and in float16 and bfloat16. PyTorch's
// 16-bit references are computed from the widened values in float32 and rounded once; the backward
// graph rounds after each of its ops, so there a result may be two steps away, and where x/3 + 1/2
// nearly cancels (HardSwish near x = -1.5) off by |dY| times one rounding of that sum.
// Central finite differences check the same rules in float64 (gradient_check_test.cc); this
// checks that they are PyTorch's functions, kinks and constants included. And end to end, a
// MobileNetV3 block as PyTorch exports it: every parameter's gradient is PyTorch's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontends/lib/npz.h"
#include "passes/autodiff/autodiff.h"
#include "tests/backends/kernel_case.h"
#include "tests/support/test_support.h"
#include "tests/support/torch_exports.h"

namespace amp::test {
namespace {

struct GradCase {
  std::string ref;  // kernel_reference.py's name
  std::string op;
  float alpha = 0;  // set: the op's alpha attribute
};

TEST(ActivationGradient, MatchesPyTorchsAutograd) {
  const std::string dir = temp_dir("activation_gradients");
  const GradCase cases[] = {{"hardswish_grad", "HardSwish"}, {"hardsigmoid_torch_grad", "HardSigmoid", 1.0f / 6}};
  struct Run {
    std::string name;
    Tensor dx;
  };
  std::vector<Run> runs;
  std::string names;
  for (const GradCase& c : cases)
    for (DType t : {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}) {
      // Values over every piece, and the kinks themselves (where PyTorch picks a side).
      Tensor x = random_tensor(t, {5, 40}, -5, 5, 51);
      Tensor kinks = random_tensor(t, {4}, -3, -3, 0), threes = random_tensor(t, {4}, 3, 3, 0);
      std::memcpy(x.mutable_data(), kinks.data(), kinks.nbytes());
      std::memcpy(x.mutable_data() + kinks.nbytes(), threes.data(), threes.nbytes());
      const Tensor dy = random_tensor(t, {5, 40}, -2, 2, 52);
      std::vector<Attribute> attrs;
      if (c.alpha != 0) attrs.push_back(Attribute::of_float("alpha", c.alpha));
      Model m = one_node_model(c.op, {{"x", x}}, std::move(attrs));
      Graph& g = *m.graph;
      Value* seed = g.add_input("dy", ValueType::tensor(t, Shape::of(dy.dims)));
      const std::vector<Value*> dx = build_gradients(g, g.lookup("y"), seed, {g.lookup("x")});
      ASSERT_NE(dx[0], nullptr);
      g.add_output(dx[0]);
      const std::string name = c.ref + "@" + std::string(dtype_name(t));
      write_npz(dir + "/" + name + ".in.npz", {{"x", x}, {"dy", dy}});
      runs.push_back({name, run_cpu(m, {{"x", x}, {"dy", dy}}, {dx[0]->name()})[0]});
      names += " " + name;
    }
  std::string out;
  ASSERT_EQ(run_python(source_dir() + "/tests/backends/kernel_reference.py " + dir + names, &out), 0) << out;
  for (const Run& r : runs) {
    const auto refs = read_npz(dir + "/" + r.name + ".ref.npz");
    ASSERT_EQ(refs.size(), 1u);
    const Tensor& want = refs[0].second;
    ASSERT_EQ(r.dx.dtype, want.dtype);
    ASSERT_EQ(r.dx.dims, want.dims);
    const bool half = r.dx.dtype == DType::kFloat16, brain = r.dx.dtype == DType::kBFloat16;
    // |dY| <= 2 times one rounding of a sum below 1.5: 2^-10 (fp16), 2^-7 (bf16).
    const double cancellation = half ? 0x1p-10 : brain ? 0x1p-7 : 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double got = r.dx.element(i), expected = want.element(i);
      if (!half && !brain) {
        EXPECT_EQ(got, expected) << r.name << " [" << i << "]";
        continue;
      }
      const int32_t steps = std::abs(ordered16(r.dx.as<uint16_t>()[i]) - ordered16(want.as<uint16_t>()[i]));
      EXPECT_TRUE(steps <= 2 || std::abs(got - expected) <= cancellation)
          << r.name << " [" << i << "]: " << got << " vs " << expected << " (" << steps << " steps)";
    }
  }
}

// The elementwise ops added for issue 31 against PyTorch's autograd in float32 and float64. Their
// backward graphs are derivatives.yaml's formulas, though not always PyTorch's operations one for
// one (1 / sqrt(v) for rsqrt(v), ONNX having no Rsqrt), so they agree to a few roundings.
struct GradRange {
  std::string ref;  // kernel_reference.py's name
  std::string op;
  double lo, hi;
  std::vector<std::pair<std::string, float>> attrs = {};
};

TEST(ActivationGradient, TrigonometricFunctionsAndActivationsMatchPyTorchsAutograd) {
  const std::string dir = temp_dir("elementwise_gradients");
  const GradRange cases[] = {
      {"softsign_grad", "Softsign", -4, 4},
      {"celu_grad", "Celu", -4, 4, {{"alpha", 2.0f}}},
      {"thresholdedrelu_grad", "ThresholdedRelu", -3, 3},
      {"hardshrink_grad", "Shrink", -2, 2},
      {"softshrink_grad", "Shrink", -2, 2, {{"bias", 0.5f}, {"lambd", 0.5f}}},
      {"sin_grad", "Sin", -6, 6},
      {"cos_grad", "Cos", -6, 6},
      {"tan_grad", "Tan", -1.3, 1.3},
      {"asin_grad", "Asin", -0.95, 0.95},
      {"acos_grad", "Acos", -0.95, 0.95},
      {"atan_grad", "Atan", -4, 4},
      {"sinh_grad", "Sinh", -4, 4},
      {"cosh_grad", "Cosh", -4, 4},
      {"asinh_grad", "Asinh", -4, 4},
      {"acosh_grad", "Acosh", 1.05, 5},
      {"atanh_grad", "Atanh", -0.95, 0.95},
  };
  struct Run {
    std::string name;
    Tensor dx;
  };
  std::vector<Run> runs;
  std::string names;
  for (const GradRange& c : cases)
    for (DType t : {DType::kFloat, DType::kDouble}) {
      const Tensor x = random_tensor(t, {4, 25}, c.lo, c.hi, 61);
      const Tensor dy = random_tensor(t, {4, 25}, -2, 2, 62);
      std::vector<Attribute> attrs;
      for (const auto& [name, value] : c.attrs) attrs.push_back(Attribute::of_float(name, value));
      Model m = one_node_model(c.op, {{"x", x}}, std::move(attrs));
      Graph& g = *m.graph;
      Value* seed = g.add_input("dy", ValueType::tensor(t, Shape::of(dy.dims)));
      const std::vector<Value*> dx = build_gradients(g, g.lookup("y"), seed, {g.lookup("x")});
      ASSERT_NE(dx[0], nullptr) << c.op;
      g.add_output(dx[0]);
      const std::string name = c.ref + "@" + std::string(dtype_name(t));
      write_npz(dir + "/" + name + ".in.npz", {{"x", x}, {"dy", dy}});
      runs.push_back({name, run_cpu(m, {{"x", x}, {"dy", dy}}, {dx[0]->name()})[0]});
      names += " " + name;
    }
  std::string out;
  ASSERT_EQ(run_python(source_dir() + "/tests/backends/kernel_reference.py " + dir + names, &out), 0) << out;
  for (const Run& r : runs) {
    const auto refs = read_npz(dir + "/" + r.name + ".ref.npz");
    ASSERT_EQ(refs.size(), 1u);
    const Tensor& want = refs[0].second;
    ASSERT_EQ(r.dx.dtype, want.dtype);
    ASSERT_EQ(r.dx.dims, want.dims);
    const double tol = r.dx.dtype == DType::kDouble ? 1e-14 : 4e-7;  // a few roundings
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double got = r.dx.element(i), expected = want.element(i);
      EXPECT_LE(std::abs(got - expected), tol * std::max(1.0, std::abs(expected)))
          << r.name << " [" << i << "]: " << got << " vs " << expected;
    }
  }
}

// MobileNetV3's inverted residual with squeeze-and-excite (tests/passes/torch_exports.py
// mobilenet_v3_block): nn.Hardswish exported as HardSwish, nn.Hardsigmoid as HardSigmoid(alpha
// 1/6), with BatchNorm, a depthwise convolution and the residual Add between them.
TEST(ActivationGradient, PyTorchMobileNetV3BlockGetsPyTorchsGradients) {
  TorchExport e = torch_export("mobilenet_v3_block");
  int hard_swish = 0, hard_sigmoid = 0;
  for (const Node* n : e.model.graph->nodes()) {
    hard_swish += n->op_type() == "HardSwish";
    hard_sigmoid += n->op_type() == "HardSigmoid";
  }
  EXPECT_EQ(hard_swish, 4);
  EXPECT_EQ(hard_sigmoid, 1);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

}  // namespace
}  // namespace amp::test
