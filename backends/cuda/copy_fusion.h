// Element copies as units: the launch of an op's copies (CudaOp::element_copies) between its
// operands, all in one strided_copies launch (a Split's or a Concat's three parts: one launch, not
// three).
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/strided_copy.cuh"

namespace amp::cuda {

// The launch of copies between an op's operands: strided_copies over all of them.
std::unique_ptr<PreparedOp> prepare_copies(std::vector<OperandCopy> copies);

}  // namespace amp::cuda
