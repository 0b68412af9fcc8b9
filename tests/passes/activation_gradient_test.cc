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
