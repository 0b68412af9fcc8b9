// Cast between the element types the generated elementwise kernels do not hold in their fp32
// registers exactly or at all: uint8, int8, int32 and int64 to and from each other, float,
// float16, bfloat16 and bool (a QDQ model's Casts of its zero points, a mask's int64 -> bool).
// Conversions as the CPU kernel makes them (backends/cpu/numeric.h convert): to float16 and
// bfloat16 through float32 (rounded to nearest even), to bool as != 0, to integers as C's cast
// (truncation; out of range is undefined in ONNX and may differ between the two).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// Whether cast() converts `from` to `to`.
bool cast_supported(DType from, DType to);
void cast(DType from, DType to, int64_t n, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
