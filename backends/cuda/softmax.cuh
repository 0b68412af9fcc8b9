// Softmax and log-softmax along one axis: the tensor seen as [outer, axis, inner].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// x and y of any float types (they differ where the op absorbed a Cast); fp32 inside. copy, when
// not null, gets the fp32 y once more as copy_type (fp16/bf16), rounded from the stored y.
void softmax_forward(DType x_type, DType y_type, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner,
                     bool log, cudaStream_t stream, void* copy = nullptr, DType copy_type = DType::kUndefined);
// ai.onnx_amp SoftmaxGrad: dx = y (dy - sum(dy y)) along the axis, sums in fp32. dy and dx of y's
// type, or of any float type around a float y (absorbed Casts).
void softmax_backward(DType y_type, DType dy_type, DType dx_type, const void* dy, const void* y, void* dx, int64_t outer,
                      int64_t axis, int64_t inner, cudaStream_t stream);

}  // namespace amp::cuda
