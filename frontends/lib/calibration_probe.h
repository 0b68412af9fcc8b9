// The measuring half of calibration (calibrate.h): a copy of the fp32 model in which every
// low-precision node of the op-list rewrite has a 16-bit twin reading the fp32 values its original
// reads, each rounded once by a Cast (as the rewrite's Casts round them). One run of that model
// gives every node's own 16-bit error at once; the errors do not accumulate from node to node.
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"
#include "graph/tensor.h"
#include "passes/amp/colour.h"

namespace amp {

// The floating outputs of one node and of its twin, by value name, pairwise.
struct NodeTwin {
  std::string node, op;
  std::vector<std::string> fp32_outputs, low_outputs;
};

// Adds a twin for each node of `m`'s main graph named in `nodes` (their decisions come from
// colouring this model or a copy with the same names: they give the data inputs and outputs).
// Both nodes' compared outputs become graph outputs.
std::vector<NodeTwin> add_low_precision_twins(Model& m, const std::vector<const NodeDecision*>& nodes, DType low);

// max |a - b| over max |a| where a is finite; counts where a is finite and b is not (overflow) and
// where a is non-zero and b zero (underflow). a: fp32 (or any float type), b: any float type.
struct TensorDifference {
  double max_abs_error = 0, max_abs_ref = 0;
  int64_t overflow = 0, underflow = 0, values = 0;
  double relative() const;  // inf when overflow > 0
};
TensorDifference tensor_difference(const Tensor& ref, const Tensor& y);

// Multiply-adds of a product node (Conv, ConvTranspose, MatMul, Gemm) given its first output's
// dims and its inputs' dims; 0 for other ops.
int64_t product_macs(const Node& n, const std::vector<int64_t>& output_dims, const std::vector<int64_t>& a_dims,
                     const std::vector<int64_t>& b_dims);

}  // namespace amp
