// ONNX's bitwise ops (opset 18; ai.onnx_amp after the import) on the device, as
// backends/cpu/bitwise.cc: BitwiseAnd, BitwiseOr, BitwiseXor of two operands broadcast (a
// BitwiseNot is one operand, the output's dims), on the eight integer types. The generated
// elementwise kernels hold values in fp32 registers, which cannot hold 32- and 64-bit integers
// exactly; a thread per element.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/broadcast_operands.h"
#include "graph/dtype.h"

namespace amp::cuda {

enum class BitwiseOp { kAnd, kOr, kXor, kNot };

// InputError for a type other than the eight integer types. `y` is unused for kNot.
void bitwise(BitwiseOp op, DType t, const BroadcastOperands& b, const void* x, const void* y, void* out, int sm_count,
             cudaStream_t stream);

}  // namespace amp::cuda
