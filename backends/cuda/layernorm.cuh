// LayerNormalization over the trailing dims: x seen as [rows, cols], scale and bias [cols].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// y = (x - mean) / sqrt(var + epsilon) * scale + bias (bias may be null); mean and inv_std
// ([rows], fp32 — ONNX's stash_type 1) are written when not null. scale, bias: type t; x: x_type,
// y: y_type — t as well, or any float type around float parameters (absorbed Casts).
// With `other` ([rows, cols] of other_type, any float type): the rows normalized are x + other, the
// residual stream's Add before the LayerNorm, summed in fp32 as the graph's Add does, and stored
// into `sum` ([rows, cols] fp32) when not null. Only for rows layernorm_forward_adds takes.
void layernorm_forward(DType t, DType x_type, DType y_type, const void* x, const void* scale, const void* bias, void* y,
                       float* mean, float* inv_std, int64_t rows, int64_t cols, float epsilon, cudaStream_t stream,
                       const void* other = nullptr, DType other_type = DType::kUndefined, float* sum = nullptr);
// Whether layernorm_forward adds a residual to rows of `cols` elements (rows it keeps in registers).
bool layernorm_forward_adds(int64_t cols);

// Scratch of layernorm_backward: per-block partial column sums in fp32.
size_t layernorm_backward_workspace(int64_t rows, int64_t cols, int sm_count);
// Gradients from dy and x (statistics recomputed): dx, and when not null dscale and dbias ([cols]).
// x, scale, dscale, dbias: type t; dy: dy_type, dx: dx_type, as layernorm_forward's x and y.
// With `residual` ([rows, cols] fp32, dx float): dx + residual instead of dx, the residual stream's
// gradient accumulated as the graph's Add does; with `narrowed`, that result also stored as
// narrowed_type (float16 or bfloat16), as a Cast of it would.
void layernorm_backward(DType t, DType dy_type, DType dx_type, const void* dy, const void* x, const void* scale, void* dx,
                        void* dscale, void* dbias, int64_t rows, int64_t cols, float epsilon, void* workspace,
                        int sm_count, cudaStream_t stream, const float* residual = nullptr, void* narrowed = nullptr,
                        DType narrowed_type = DType::kUndefined);

}  // namespace amp::cuda
