// Softmax and log-softmax along one axis: the tensor seen as [outer, axis, inner].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

void softmax_forward(DType t, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner, bool log,
                     cudaStream_t stream);

}  // namespace amp::cuda
