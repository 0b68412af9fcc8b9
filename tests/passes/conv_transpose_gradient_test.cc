// ConvTranspose end to end against PyTorch's autograd: tests/passes/torch_exports.py's unet_block
// (strided Conv down, nn.ConvTranspose2d up — k3 s2 p1 output_padding 1, grouped k2 s2 without bias,
// dilated — and a skip concatenation), as PyTorch 1.13 exports it in training mode, gets PyTorch's
// loss and the gradient of every parameter (gradient_check_test.cc checks the rule alone by
// central differences).
#include <gtest/gtest.h>

#include "tests/support/torch_exports.h"

namespace amp::test {
namespace {

TEST(ConvTransposeGradient, PyTorchUNetBlockGetsPyTorchsGradients) {
  TorchExport e = torch_export("unet_block");
  int transposed = 0;
  for (const Node* n : e.model.graph->nodes()) transposed += n->op_type() == "ConvTranspose";
  EXPECT_EQ(transposed, 3);
  expect_pytorch_gradients(e, 2e-5, 1e-4);
}

}  // namespace
}  // namespace amp::test
