// Training-mode Dropout with a counter-based generator whose seed is read from device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// y = keep ? x / (1 - ratio) : 0, keep drawn per element from (seed, salt, index); mask (may be
// null) receives keep as bool.
void dropout_forward(DType t, const void* x, void* y, bool* mask, int64_t n, float ratio, const unsigned long long* seed,
                     uint64_t salt, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
