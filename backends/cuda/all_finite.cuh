// ai.onnx_amp AllFinite over many tensors in few launches: the overflow check of a step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct CheckedTensor {
  DType type;
  int64_t n;
};

// flag (one bool in device memory) = no element of any tensor is inf or NaN; with scale (one
// float in device memory, else null), no element times *scale, rounded to float32.
void all_finite(const std::vector<CheckedTensor>& tensors, const std::vector<const void*>& data, const float* scale,
                bool* flag, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
