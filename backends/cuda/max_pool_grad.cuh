// MaxPoolGrad of a 2-D MaxPool over channels-last data ([N, H, W, C] in memory, C a multiple of 8):
// each element of dX gathers dY from the windows whose arg-max it is, found again from X with the
// CPU kernel's rule (backends/cpu/grad_pool.cc: the first maximum in the window's row-major order,
// a NaN taking the place of whatever came before it), the windows taken in the output's order and
// summed in fp32, dX rounded once: the CPU backend's bits. A thread takes 8 channels of one
// position (16-byte loads; a 3x3 window at stride 2 covers a position from at most 4 windows).
// cuDNN's NHWC backward (after the forward it needs, recomputed) took 1.02 ms of ResNet-50's bf16
// step at batch 128 on an H200 (2026-11-28), about 0.5 TB/s.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct MaxPoolGrad2d {
  DType t = DType::kUndefined;  // fp32, fp16 or bf16: dY, X and dX
  int64_t n = 0, c = 0, h = 0, w = 0;  // X's (and dX's) dims
  int64_t out_h = 0, out_w = 0;        // dY's
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;  // pads at the start
  const void* dy = nullptr;
  const void* x = nullptr;
  void* dx = nullptr;
};

// Whether max_pool_grad_channels_last takes these pointers and channels (C a multiple of 8, every
// pointer 16-byte aligned).
bool max_pool_grad_channels_last_fits(const MaxPoolGrad2d& a);
void max_pool_grad_channels_last(const MaxPoolGrad2d& a, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
