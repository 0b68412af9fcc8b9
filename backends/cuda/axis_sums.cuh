// The gradient of an op whose output reads its input axis by axis (PadGrad, ResizeGrad), as a
// gather: every output axis index o reads input indices i along that axis with weights w (Pad: the
// one index pad_source gives, weight 1; Resize: its taps), so dX[i] is the sum, over every
// combination of the per-axis lists of (o, w) that read i, of dY[o] times the product of the w.
// A thread per dX element walks its combinations in dY order (the last axis fastest) and sums in
// fp32 (fp64 for double: then the CPU's sums exactly, in its order), then rounds once: no
// atomics, the same result on every run and device. The lists are tables on the device
// (axis_sum_plan.h builds and uploads them): per axis a CSR row of in[a] + 1 offsets into the
// entries, which hold the dY index along the axis and, when weighted, the weight (a double, as
// graph/ops/resize.h computes it; products of weights are taken in the sum's type).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxAxisSumRank = 8;

struct AxisSumShape {
  int rank = 0;
  int64_t in[kMaxAxisSumRank] = {};     // dX's dims
  int64_t out[kMaxAxisSumRank] = {};    // dY's dims
  int64_t first[kMaxAxisSumRank] = {};  // where axis a's in[a] + 1 offsets start in `offsets`
  bool weighted = false;                // else every weight is 1 and `weight` is not read
  DType type = DType::kFloat;
};

// offsets: the per-axis CSR rows (int64, absolute positions in index/weight); index: the dY index
// along the axis of each entry; weight: its weight when s.weighted.
void axis_sums(const AxisSumShape& s, const int64_t* offsets, const int64_t* index, const double* weight, const void* dy,
               void* dx, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
