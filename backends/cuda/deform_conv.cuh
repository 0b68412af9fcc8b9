// ai.onnx_amp DeformConv (ONNX opset 19, 2-D) over float, float16 or bfloat16 tensors, as the CPU
// kernel (backends/cpu/deform_conv.cc) and torchvision's deform_conv2d compute it: each kernel tap
// of each output pixel reads its input channel bilinearly at the tap's place shifted by its offset
// group's (dy, dx), corners outside the image counting zero, times the mask, and the taps' products
// with W are summed over the group's channels, plus the bias. fp32 arithmetic, rounded once to the
// storage type. A thread per output element walks its C/group · kH · kW taps (no column matrix):
// the CPU's GEMM sums in another order, so the two agree to fp32 rounding, not bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct DeformConvShape {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // X
  int64_t outputs = 0, kernel_h = 1, kernel_w = 1;         // W [outputs, channels / groups, kernel_h, kernel_w]
  int64_t out_h = 0, out_w = 0, groups = 1, offset_groups = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

// offset: [N, offset_groups · 2 · kH · kW, out_h, out_w]; bias [outputs] and mask [N, offset_groups ·
// kH · kW, out_h, out_w] may be null; y: [N, outputs, out_h, out_w]. All of type t.
void deform_conv(DType t, const DeformConvShape& s, const void* x, const void* w, const void* offset, const void* bias,
                 const void* mask, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
