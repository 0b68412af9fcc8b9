// BitShift on the device, as backends/cpu/bit_shift.cc: X shifted LEFT or RIGHT by Y bits, unsigned
// integers of one type (uint8, uint16, uint32, uint64), broadcast; a shift by the type's width or
// more gives 0, as numpy's (C leaves it undefined). The generated elementwise kernels hold values
// in fp32 registers, which cannot hold 32- and 64-bit integers exactly; a thread per element.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/broadcast_operands.h"
#include "graph/dtype.h"

namespace amp::cuda {

// InputError for a type other than the four unsigned integer types.
void bit_shift(DType t, bool left, const BroadcastOperands& b, const void* x, const void* y, void* out, int sm_count,
               cudaStream_t stream);

}  // namespace amp::cuda
