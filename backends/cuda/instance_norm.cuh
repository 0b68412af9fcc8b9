// InstanceNormalization and MeanVarianceNormalization: each group of elements (an (n, c) plane;
// MVN's elements that share their kept indices) normalised by its own mean and biased variance,
// over float, float16 or bfloat16 tensors. The statistics are fp64 and two-pass, as the CPU
// kernels' (backends/cpu/norm.cc): GAN and style-transfer planes of 256 x 256 values summed in
// fp32 lose the small spread they normalise. Then, in the CPU's order and roundings:
//   InstanceNormalization: inv = fp32(1 / sqrt(var + epsilon)), m = fp32(mean),
//     y = ((x - m) * inv) * scale[c] + B[c] in fp32, each step rounded (no fused multiply-add);
//   MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + 1e-9) in fp64, rounded to fp32 and
//     then to the storage type, as the CPU stores it.
// The fp64 sums are a tree over the block rather than the CPU's lanes, which moves the statistics
// by an ulp of a double at most: the fp32 results agree with the CPU's but where that ulp decides
// a rounding. A block per group; gradients are autodiff's standard ops
// (passes/autodiff/normalization_gradients.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/axis_groups.cuh"
#include "graph/dtype.h"

namespace amp::cuda {

struct InstanceNormShape {
  int64_t planes = 0, channels = 0, size = 0;  // x as [planes = N * C, size], plane p of channel p % C
  float epsilon = 1e-5f;
};

// InputError for a rank below 2.
InstanceNormShape instance_norm_shape(const std::vector<int64_t>& dims, float epsilon);
// scale and bias: [C] of x's type.
void instance_norm(DType t, const InstanceNormShape& s, const void* x, const void* scale, const void* bias, void* y,
                   int sm_count, cudaStream_t stream);
void mean_variance_norm(DType t, const AxisGroups& g, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
