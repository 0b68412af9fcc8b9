// The pattern of a ResNet layer's normalisation, forward and backward, as two device units
// (batch_norm_relu.cuh computes them):
//   forward   y = Relu(BatchNormalization(x, scale, B, mean, var) [+ z]), and mask = Greater(y, 0)
//   backward  dX, dscale, dB = BatchNormalizationGrad(Where(mask, dY [= Add(dY1, dY2)], 0), x, scale)
// and when z is itself a BatchNormalization's result that only the Add reads (a downsampling
// block's shortcut), that BatchNorm and its BatchNormalizationGrad of the same Where's result too.
// The forward keeps the mask as bits (1/16 of a 16-bit y), the backward reads them instead of y,
// and neither stores BatchNorm's result or the Add's. The backward also writes Where's result when
// something else reads it: the gradient of the residual Add's other operand; and when dY is the
// sum of two gradients that only the Where reads (a residual block's input, read by the block's
// first convolution and its shortcut), it reads the two and adds them itself. With the shortcut's
// BatchNorm inside, neither z nor (unless read elsewhere) Where's result is stored.
// Matched: a training-mode BatchNormalization whose result only the Add (of exactly its shape and
// type) or the Relu reads, with fp32 scale, bias and statistics (the statistics are fp32 whatever
// x's type). The mask is kept as bits when its one reader is a Where whose result feeds the
// BatchNormalizationGrad of the same x and scale; otherwise the forward is fused alone and the
// backward stays as autodiff wrote it.
// Channels-last (CudaOp::channels_last): for 16-bit [N, C, H, W] data both units also compute with
// every data operand stored NHWC (x, z, y, dY, dX, ... and the mask's bits, then in NHWC element
// order), the kernels seeing [N*H*W, C, 1] instead of [N, C, H*W]; never the per-channel operands.
#pragma once

#include <functional>
#include <vector>

#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/unit_patterns.h"

namespace amp::cuda {

std::vector<UnitMatch> match_batch_norm_relu(const Graph& g, const std::function<bool(const Node*)>& excluded);

// x's memory as the kernels see it, [outer, C, inner]: [N, C, the rest] stored as its dims say,
// [N * the rest, C, 1] stored channels-last (they find a channel by position either way).
ChannelGeometry channel_geometry(const TensorDesc& x);

// `a` with the operands of a BatchNormalization bound as it lists them: x, scale, B, input_mean and
// input_var at inputs 0-4, y at result 0, and running_mean and running_var at results 1 and 2
// where `mean` and `var` say they are.
BatchNormReluForward bound_batch_norm(const BatchNormReluForward& a, const OpBuffers& b, bool mean, bool var);

// The backward unit of a BatchNorm + ReLU whose mask is recomputed from x and the forward's
// statistics rather than read as bits (conv_batch_norm_fusion.h). Operands: 0 dY, 1 the
// statistics (BatchNormSums), 2 x, 3 scale, 4-6 absent, 7 B; results: dX, dscale, dB.
std::unique_ptr<CudaOp> batch_norm_relu_grad_from_sums(const Node& grad);

}  // namespace amp::cuda
