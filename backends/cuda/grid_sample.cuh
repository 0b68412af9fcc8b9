// GridSample (opset 16) on the device: Y [N, C, H_out, W_out] samples X [N, C, H, W] at grid
// [N, H_out, W_out, 2] in mode bilinear, nearest or bicubic with padding_mode zeros, border or
// reflection, as backends/cpu/grid_sample.cc (PyTorch's grid_sample) computes it, step for step:
// fp64 throughout, each product and sum rounded (_rn: nvcc contracts nothing into a fused
// multiply-add), rounded to fp32 and then to the storage type once, so the results are the CPU's
// bit for bit. X and the grid each float, float16 or bfloat16 (not double, as the device's other
// float kernels). A thread per output element, which recomputes its grid point's taps.
// The gradient as ai.onnx_amp GridSampleGrad computes it on the CPU, bit for bit as well.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
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

// ai.onnx_amp GridSampleGrad: dX [N, C, H, W] (null: not wanted) and dGrid [N, H_out, W_out, 2]
// (null: not wanted) from dY, X and the grid, the CPU's sums in the CPU's order, rounded once.
// dX sums in `workspace` (grid_sample_grad_workspace bytes); a thread per (n, c) map walks its
// batch entry's points in order, so dX's parallelism is N * C threads.
inline size_t grid_sample_grad_workspace(const GridSampleShape& s) {
  return static_cast<size_t>(s.batch * s.channels * s.height * s.width) * sizeof(double);
}
void grid_sample_grad(DType x_type, DType grid_type, const GridSampleShape& s, const void* dy, const void* x,
                      const void* grid, void* dx, void* dgrid, void* workspace, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
