// GridSample (opset 16) on the device: Y [N, C, H_out, W_out] samples X [N, C, H, W] at grid
// [N, H_out, W_out, 2] in mode bilinear, nearest or bicubic with padding_mode zeros, border or
// reflection, as backends/cpu/grid_sample.cc (PyTorch's grid_sample) computes it, step for step:
// fp64 throughout, each product and sum rounded (_rn: nvcc contracts nothing into a fused
// multiply-add), rounded to fp32 and then to the storage type once, so the results are the CPU's
// bit for bit. X and the grid each float, float16 or bfloat16 (not double, as the device's other
// float kernels). A thread per output element, which recomputes its grid point's taps.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct GridSampleShape {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // X
  int64_t out_h = 0, out_w = 0;                            // the grid's [N, H_out, W_out, 2]
  int mode = 0;     // 0 bilinear, 1 nearest, 2 bicubic
  int padding = 0;  // 0 zeros, 1 border, 2 reflection
  bool align_corners = false;
};

void grid_sample(DType x_type, DType grid_type, const GridSampleShape& s, const void* x, const void* grid, void* y,
                 int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
