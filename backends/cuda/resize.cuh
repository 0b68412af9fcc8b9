// Resize on the device (nearest and linear): a thread per output element works out, per axis, the
// input indices and weight graph/ops/resize.h's resize_taps gives (the same double operations),
// then interpolates over the axes whose weight is not 0, nested as the CPU kernel nests them
// (backends/cpu/resize.cc), in fp32 with one rounding on store. At most kMaxResizeRank axes and
// 3 interpolating ones (trilinear).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxResizeRank = 8;

struct ResizeShape {
  int rank = 0;
  int64_t in[kMaxResizeRank] = {}, out[kMaxResizeRank] = {};
  double inverse[kMaxResizeRank] = {}, resized[kMaxResizeRank] = {};
  int mode = 0;     // ResizeAttrs::Mode
  int coord = 0;    // ResizeAttrs::Coord
  int nearest = 0;  // ResizeAttrs::Nearest
  DType type = DType::kFloat;
};

void resize(const ResizeShape& s, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
