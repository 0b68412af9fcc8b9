// What the fused units of layer_norm_residual_fusion.h are made of (normalization_ops.cc).
#pragma once

#include <memory>

#include "backends/cuda/cuda_op.h"
#include "graph/node.h"

namespace amp::cuda {

// ai.onnx_amp LayerNormalizationGrad's op. Operands dY, X, Scale and, optionally, R: the gradient
// reaching X by the residual stream, added to dX in fp32 (results dX + R, [dScale], [dB], and as
// result 3 optionally that sum narrowed to float16 or bfloat16).
std::unique_ptr<CudaOp> make_layer_norm_grad(const Node& grad);

// LayerNormalization's op. Operands X, Scale, [B] and, optionally, O: the other operand of the
// residual stream's Add whose sum X + O the LayerNorm normalizes (results Y, [Mean], [InvStdDev],
// and as result 3 optionally the sum, fp32).
std::unique_ptr<CudaOp> make_layer_norm(const Node& norm);

}  // namespace amp::cuda
