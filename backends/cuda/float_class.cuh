// IsNaN and IsInf on the device, as backends/cpu/float_class.cc: which elements of a float,
// float16, bfloat16 or double tensor are NaN, or infinite (IsInf's detect_positive and
// detect_negative choose the signs), as bool. 16-bit values are widened to fp32, which keeps every
// NaN and infinity. A thread per element in a grid-stride loop.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct FloatClassTest {
  bool nan = false;                 // IsNaN; else IsInf with the signs below
  bool positive = true, negative = true;
};

// InputError for a type other than the four float types.
void float_class(DType t, const FloatClassTest& test, const void* x, bool* y, int64_t n, int sm_count,
                 cudaStream_t stream);

}  // namespace amp::cuda
