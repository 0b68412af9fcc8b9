// MatMul and Gemm on cuBLASLt, and the matcher that lets a product absorb the nodes after it:
//   MatMul|Gemm -> Add(bias over the last dim) [-> Relu]   : one product with a BIAS / RELU_BIAS epilogue
//   X^T dY or dY^T X (2-D) + ReduceSum of dY's rows         : one weight-gradient product that also
//                                                            writes the bias gradient (BGRADA/B),
//                                                            also where dY is a 3-D gradient reshaped
//   2-D product -> Transpose                                : the transpose, operands swapped
//   ... -> Relu -> Greater(., 0), the ReLU gradient's mask  : RELU_AUX_BIAS writes the mask as
//                                                            cuBLASLt's bitmask (1 bit an element)
//   product -> Where(that mask, ., 0) [-> ReduceSum of rows]: the ReLU's backward, DRELU (DRELU_BGRAD
//                                                            writing the bias gradient too)
//   ... -> Add(bias) -> Gelu(approximate tanh)              : GELU_BIAS, or GELU_AUX_BIAS writing
//                                                            GELU's input too when others read it
//   product -> GeluGrad(., that input) [-> ReduceSum of rows]: GELU's backward, DGELU (DGELU_BGRAD)
// Each saves a full read and write of the product's output, the size of the layer's activations;
// the mask pair also the kernel that read y and dY to write dH, for a mask of 1 bit an element.
// Not matched: the exact (erf) GELU of nn.GELU(). cuBLASLt's GELU is the tanh approximation;
// fusion must not change results, so the erf form runs as a generated elementwise kernel.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "graph/graph.h"

namespace amp::cuda {

struct ProductFusion {
  std::vector<const Node*> nodes;     // the product first, then what its epilogue absorbs
  std::vector<const Value*> inputs;   // the op's operands, in its order (null for absent)
  std::vector<const Value*> outputs;  // the op's results, in its order
  std::unique_ptr<CudaOp> op;
};

// Products in g with an epilogue to absorb; nodes for which `excluded` is true are not touched.
// An absorbed node's output must have no other reader than the chain itself (it is never
// materialised) and must not be a graph output.
std::vector<ProductFusion> match_product_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded);

}  // namespace amp::cuda
