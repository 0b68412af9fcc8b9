// Issue 16's ops end to end against PyTorch's autograd: tests/passes/torch_exports.py's
// zoo_ops_block, as PyTorch 1.13 exports it in training mode — Pad in reflect, constant (0.5) and
// edge mode, Elu, Selu, Softplus, Resize bilinear (half_pixel, align_corners) and nearest, with
// their scales and sizes computed by Shape/Concat — gets PyTorch's loss and the gradient of every
// parameter (central differences check each rule alone in gradient_check_test.cc).
#include <gtest/gtest.h>

#include <map>

#include "tests/support/torch_exports.h"

namespace amp::test {
namespace {

TEST(ZooOpsGradient, PyTorchBlockWithPadResizeAndActivationsGetsPyTorchsGradients) {
  TorchExport e = torch_export("zoo_ops_block");
  std::map<std::string, int> ops;
  std::map<std::string, int> modes;
  for (const Node* n : e.model.graph->nodes()) {
    ops[n->op_type()]++;
    if (n->op_type() == "Pad" || n->op_type() == "Resize") modes[n->op_type() + ":" + n->attr_string("mode", "")]++;
  }
  EXPECT_EQ(ops["Pad"], 3);
  EXPECT_EQ(ops["Resize"], 3);
  EXPECT_EQ(ops["Elu"], 1);
  EXPECT_EQ(ops["Selu"], 1);
  EXPECT_EQ(ops["Softplus"], 1);
  EXPECT_EQ(modes["Pad:reflect"], 1);
  EXPECT_EQ(modes["Pad:edge"], 1);
  EXPECT_EQ(modes["Resize:linear"], 2);
  EXPECT_EQ(modes["Resize:nearest"], 1);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

// InstanceNormalization (affine), ReduceLogSumExp, ReduceL2 and ReduceL1 as PyTorch exports
// nn.InstanceNorm2d, torch.logsumexp and torch.norm: PyTorch's loss and gradients.
TEST(ZooOpsGradient, PyTorchBlockWithInstanceNormAndNormReductionsGetsPyTorchsGradients) {
  TorchExport e = torch_export("norm_reduce_block");
  std::map<std::string, int> ops;
  for (const Node* n : e.model.graph->nodes()) ops[n->op_type()]++;
  EXPECT_EQ(ops["InstanceNormalization"], 1);
  EXPECT_EQ(ops["ReduceLogSumExp"], 1);
  EXPECT_EQ(ops["ReduceL2"], 1);
  EXPECT_EQ(ops["ReduceL1"], 1);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

}  // namespace
}  // namespace amp::test
