// Mean on the device, as backends/cpu/mean.cc: the elementwise mean of one or more tensors of one
// float type (float, float16, bfloat16, double), broadcast. The operands are added left to right
// in fp32 (fp64 for double), divided by their count and rounded once on store, so the result is
// the CPU's bit for bit. The generated elementwise kernels fold a variadic Sum, but a Mean's
// division by the operand count is not a fold; a thread per output element walks its operands.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/broadcast_operands.h"
#include "graph/dtype.h"

namespace amp::cuda {

// InputError for a type other than the four float types.
void mean(DType t, const BroadcastOperands& b, const std::vector<const void*>& operands, void* out, int sm_count,
          cudaStream_t stream);

}  // namespace amp::cuda
