// The host half of axis_sums.cuh: the per-axis read lists of a gradient (PadGrad, ResizeGrad) as
// tables on the device, uploaded once per plan, and the op that sums through them every run.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_op.h"

namespace amp::cuda {

// reads[a][i]: the (dY index along axis a, weight) pairs that read dX index i along axis a, in
// increasing dY index.
using AxisReads = std::vector<std::vector<std::pair<int64_t, double>>>;

// dX (of dx's dims and type) from dY through the lists; weights are applied only when `weighted`.
// InputError beyond kMaxAxisSumRank axes or for a type other than fp32, fp16, bf16 and fp64.
std::unique_ptr<PreparedOp> prepare_axis_sums(const std::vector<AxisReads>& reads, const TensorDesc& dy,
                                              const TensorDesc& dx, bool weighted, DeviceContext& ctx);

}  // namespace amp::cuda
