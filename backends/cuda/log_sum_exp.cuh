// ReduceLogSumExp over any set of axes of a float, float16 or bfloat16 tensor: per output,
// m + log(sum of exp(x - m)) with m the group's max, so no term overflows; an infinite or NaN max
// is the result itself (every term -inf: log 0; a +inf or a NaN among them), as the CPU kernel
// (backends/cpu/reduce.cc) computes it, in fp32 and rounded once on store. The CPU adds the
// terms in input order, a block here as a tree, and expf/logf are the device's (within 2 ulp, the
// host's within 1): the two agree to a few fp32 ulps of the sum, not bit for bit. A block per
// output; ReducePlan's passes (reduce.cuh) combine one value per element and cannot take the
// second pass's per-group shift.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/axis_groups.cuh"
#include "graph/dtype.h"

namespace amp::cuda {

// y: one element per group (AxisGroups' order: the output's).
void reduce_log_sum_exp(DType t, const AxisGroups& g, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
