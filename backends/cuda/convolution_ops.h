// The matcher that lets a convolution absorb the nodes after it into one
// cudnnConvolutionBiasActivationForward, y = act(conv(x) + z + bias):
//   Conv(x, W, B) [-> Add(z of exactly Y's shape and type)] [-> Relu]
// Each absorbed node saves a read and a write of the layer's activations (the residual block of
// models/cnn.onnx was three passes after the convolution: its bias, the Add and the ReLU).
// Not matched: a Conv without its bias (exported models fold BatchNorm into the bias; a zero bias
// would be one more buffer to keep), a broadcast Add, other activations (cuDNN fuses only RELU and
// IDENTITY), and anything behind a Cast (the fused kernel writes Y's type only).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "graph/graph.h"

namespace amp::cuda {

struct ConvFusion {
  std::vector<const Node*> nodes;     // the Conv first, then what it absorbs
  std::vector<const Value*> inputs;   // x, W, B, z (null when no Add was absorbed)
  std::vector<const Value*> outputs;  // the last absorbed node's result
  std::unique_ptr<CudaOp> op;
};

// Convolutions in g with an Add or a Relu to absorb; nodes for which `excluded` is true are not
// touched. An absorbed node's input must have no other reader than the chain (it is never
// materialised) and must not be a graph output.
std::vector<ConvFusion> match_convolution_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded);

}  // namespace amp::cuda
