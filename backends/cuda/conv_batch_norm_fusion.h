// A 16-bit BatchNorm + ReLU between two convolutions never makes a pass over memory of its own
// (cuDNN's convolution fusions with batch norm, cudnn_convolution_graph.h):
//   x = Conv_a(...)                 the convolution sums x's per-channel statistics as it writes x
//                                   (GenStats in its epilogue), stored packed in place of the
//                                   ReLU's mask: 2C floats (BatchNormSums);
//   y = Relu(BatchNormalization(x)) never stored: the next convolution reads x and applies
//   Conv_b(y)                       s = scale / sqrt(var + eps), b = B - mean s and the ReLU as it
//                                   reads it (its prologue), after a per-channel pass turning the
//                                   sums into s, b and the running statistics;
//   ConvGrad_b(dY, y, W)            its weight gradient reads x and applies the same prologue;
//   BatchNormalizationGrad(Where(Greater(y, 0), dY, 0), x, scale)
//                                   recomputes the mask from x, s and b (batch_norm_relu.cuh).
// Against the fused BatchNorm + ReLU units (batch_norm_relu_fusion.h) each such layer saves a
// read of x, a write of y and the mask's bits written and read: 2C floats stand in for them.
// Matched: a training-mode BatchNormalization of fp16/bf16 x with fp32 parameters, x made by a
// Conv, y read by exactly the Greater of its ReLU's gradient, one Conv and that Conv's ConvGrad
// (and Shape/Size), both convolutions without bias, group 1, 2 spatial dims, explicit symmetric
// pads; the backward as batch_norm_relu_fusion.h finds it, without a summed dY. A device whose
// cuDNN offers no engine for a graph runs the same work unfused in the unit (the prologue into
// scratch, the legacy convolution, the sums in a pass of their own; the device report says so),
// moving more than the plan counts.
// Channels-last (CudaOp::channels_last): the 16-bit units also compute with X, Y, dY, dX stored
// NHWC and W, dW KRSC — the layout cuDNN's fusion engines are built for — the graphs described so
// and the fallback on the legacy convolutions' channels-last path; the statistics, scale and bias
// are per channel, the same either way.
#pragma once

#include <functional>
#include <vector>

#include "backends/cuda/unit_patterns.h"

namespace amp::cuda {

std::vector<UnitMatch> match_conv_batch_norm(const Graph& g, const std::function<bool(const Node*)>& excluded);

}  // namespace amp::cuda
