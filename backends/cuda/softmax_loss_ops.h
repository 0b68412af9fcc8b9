// The loss op's merged form (softmax_loss_ops.cc): what loss_argmax_fusion.h builds its units from.
#pragma once

#include <memory>

#include "backends/cuda/cuda_op.h"
#include "graph/node.h"

namespace amp::cuda {

// SoftmaxCrossEntropyLoss that also writes the ArgMax over the classes of its [N, C] scores, as
// the ArgMax node `argmax` (over the last axis of the same scores) does: the loss's operands; its
// results, then the ArgMax's indices (N of them, any dims) as result 2.
std::unique_ptr<CudaOp> make_cross_entropy_with_argmax(const Node& loss, const Node& argmax);

}  // namespace amp::cuda
