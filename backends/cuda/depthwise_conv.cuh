// Depthwise 2-D convolution — one filter per channel (group = C = K, W [C, 1, KH, KW]) — over
// row-major [N, C, H, W] data, forward and both gradients, for 3x3, 5x5 and 7x7 filters (the
// depthwise convolutions of MobileNet, EfficientNet and ConvNeXt), any stride and padding, unit
// dilations. Sums are fp32, each result rounded once; the weight gradient sums each (channel, tap)
// over the batch and the image in fixed parts and adds the parts in order (the same bits every
// run). cuDNN's legacy algorithms ran these at 34-118 GB/s on an H200 (2026-11-28): 59 of
// convnext_tiny's 92 ms bf16 step at batch 128 and 34 ms of efficientnet_b0's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct DepthwiseConv2d {
  DType t = DType::kUndefined;  // x, w, y, dy, dx, dw (and the bias): fp32, fp16 or bf16
  int64_t n = 0, c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;  // pads at the start
};

// Whether these kernels take g: a 3x3, 5x5 or 7x7 filter, a float type, a non-empty shape.
bool depthwise_conv_fits(const DepthwiseConv2d& g);

// y = x * w (+ bias[c]), summed in fp32 (the bias added last), rounded once.
void depthwise_conv_forward(const DepthwiseConv2d& g, const void* x, const void* w, const void* bias, void* y,
                            int sm_count, cudaStream_t stream);
// dx = the transposed convolution of dy with w.
void depthwise_conv_backward_data(const DepthwiseConv2d& g, const void* dy, const void* w, void* dx, int sm_count,
                                  cudaStream_t stream);
// dw[c, tap] = sum over n and the output positions of dy * the x the tap reads.
size_t depthwise_conv_backward_filter_workspace(const DepthwiseConv2d& g, int sm_count);
void depthwise_conv_backward_filter(const DepthwiseConv2d& g, const void* dy, const void* x, void* dw, void* workspace,
                                    int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
