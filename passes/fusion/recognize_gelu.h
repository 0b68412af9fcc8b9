// GELU spelled out as elementwise nodes becomes one ai.onnx_amp Gelu node:
//   exact  x * (1 + erf(x / sqrt 2)) * 0.5                           (PyTorch's export of nn.GELU())
//   tanh   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (approximate="tanh", GPT-2's gelu_new)
// in any order of the commutative operands, x / sqrt 2 or x * (1 / sqrt 2), x^3 as Pow(x, 3) or
// x * x * x, and the 0.5 applied to x, to (1 + ...) or to the product.
//
// Why: autodiff of the spelled-out form keeps two more tensors of the MLP's widest activation for
// the backward pass (x / sqrt 2 and 1 + erf) and emits a dozen elementwise nodes; Gelu's gradient
// is one GeluGrad reading x, as PyTorch's. A 16-bit forward rounds once instead of after each of
// the five or nine nodes. And a product followed by the tanh form can run cuBLASLt's GELU
// epilogues (backends/cuda/matmul_ops.h).
//
// Only exact spellings are replaced: the constants must be these values in their own type (one
// rounding of sqrt 2 to float32, say), every node in between must have no other reader and must not
// be a graph output, and all of it must be of one floating-point type. Scalar Constant nodes left
// without readers are removed. amp-train runs this on the model it trains; amp-rewrite does not
// (its output must stay standard ONNX, which has no Gelu before opset 20).
#pragma once

#include "passes/pass.h"

namespace amp {

class RecognizeGeluPass : public Pass {
 public:
  std::string name() const override { return "recognize-gelu"; }
  std::string summary() const override { return "replace GELU spelled with Erf or Tanh by one ai.onnx_amp Gelu"; }
  bool run(Model& m) override;
};

}  // namespace amp
