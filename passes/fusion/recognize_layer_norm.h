// LayerNorm over the last axis spelled out as elementwise nodes becomes ONNX's LayerNormalization
// (opset 17, axis -1), the way PyTorch before opset 17 exports nn.LayerNorm:
//   mean = ReduceMean(x, axes=[-1], keepdims=1)     d = Sub(x, mean)
//   var = ReduceMean(Pow(d, 2), axes=[-1], keepdims=1)
//   y = Add(Mul(Div(d, Sqrt(Add(var, eps))), scale), bias)
// with the commutative operands in either order.
//
// Why: amp-rewrite keeps the chain fp32 behind a Cast from fp16, and ONNX Runtime's LayerNormFusion
// swallows that Cast too, building a LayerNormalization-17 with fp16 X and fp32 Scale and B, which
// ORT itself then rejects (its T binds to two types). With one LayerNormalization there is nothing
// left for ORT to fuse, and the model computes the norm with one rounding per step.
//
// Only exact spellings are replaced: axes [-1] or [rank-1] of a known rank, keepdims 1, the
// exponent a scalar constant exactly 2, eps a scalar constant, scale and bias constants or
// initializers of shape [D] with D the size of x's last axis; every intermediate has no reader
// outside the chain and is not a graph output; all of it is of one floating-point type.
// Where shape inference does not know x's last dim (usual in an exported transformer, after a
// Reshape to computed dims), D is the scale's size: the chain would also accept a last dim of 1
// (broadcast to D) where LayerNormalization refuses it, a size nn.LayerNorm(D) itself refuses, so
// PyTorch's exports never compute it.
// Runs only when the model's default-domain opset is at least 17 (LayerNormalization's first).
#pragma once

#include "passes/pass.h"

namespace amp {

class RecognizeLayerNormPass : public Pass {
 public:
  std::string name() const override { return "recognize-layer-norm"; }
  std::string summary() const override {
    return "replace LayerNorm spelled with ReduceMean, Pow, Sqrt and Div by one LayerNormalization";
  }
  bool run(Model& m) override;
};

}  // namespace amp
