// RoiAlign (opset 16) over float or float16 feature maps [N, C, H, W]: for each region [x1, y1, x2,
// y2] (times spatial_scale, less half a pixel with coordinate_transformation_mode half_pixel) on
// its batch entry's map, output_height x output_width bins, each the average (mode avg) or the
// largest (mode max: the largest of each sample's four weighted corner terms, as ONNX Runtime) of
// sampling_ratio² bilinear samples (0: ceil(bin size) a side), out-of-map samples zero. The CPU
// kernel's arithmetic (backends/cpu/roi_align.cc), step for step: fp64 throughout, each product and
// sum rounded (_rn: nvcc contracts nothing into a fused multiply-add), rounded to fp32 and then to
// the storage type once — so the results are the CPU's bit for bit. bfloat16 and double are not
// taken, as the CPU does not (bfloat16) or the device's other float kernels do not (double). A
// batch index outside [0, N), which the CPU refuses, cannot be reported from a kernel: its
// region's outputs are zeros. A thread per output element, which walks its bin's samples.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct RoiAlignShape {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // X
  int64_t rois = 0, out_h = 1, out_w = 1;
  bool max = false, half_pixel = true;
  int64_t sampling_ratio = 0;
  float spatial_scale = 1.0f;
};

// rois: [rois, 4] of x's type; batch_indices: [rois] int64; y: [rois, C, out_h, out_w].
void roi_align(DType t, const RoiAlignShape& s, const void* x, const void* rois, const int64_t* batch_indices, void* y,
               int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
