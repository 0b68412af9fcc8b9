// The ReLU mask in the layout of cuBLASLt's RELU_AUX epilogues, for products that get no
// algorithm with them: the forward's ReLU still leaves the mask its backward reads, and the
// backward applies a mask cuBLASLt wrote.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// For a row-major [rows, cols] y: bit r * ld + j of the mask is y[r, j] > 0, bit i being bit i % 8
// of byte i / 8; ld is a multiple of 128 (gemm_aux_ld) and the bits past cols are cleared.
void write_relu_mask(DType t, const void* y, void* mask, int64_t rows, int64_t cols, int64_t ld, int sm_count,
                     cudaStream_t stream);

// dy[r, j] = +0 where bit r * ld + j of the mask is clear (the gradient a ReLU lets through), in place.
void apply_relu_mask(DType t, void* dy, const void* mask, int64_t rows, int64_t cols, int64_t ld, int sm_count,
                     cudaStream_t stream);

}  // namespace amp::cuda
