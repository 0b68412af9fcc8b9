// LRN (AlexNet, GoogLeNet and ZFNet from Caffe): y = x / (bias + alpha / size * the sum of x^2
// over channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2))^beta, over [N, C, ...]
// tensors of float, float16 or bfloat16, computed in fp32 and rounded once on store, in the CPU
// kernel's order (backends/cpu/norm.cc): the squares summed from the lowest channel up, each
// product and sum rounded to fp32 (no fused multiply-add), so the two agree but for powf's last
// bits on a device. Its gradient is the rule of passes/autodiff (Conv and elementwise ops).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct LrnShape {
  int64_t batches = 0, channels = 0, inner = 0;  // x as [N, C, inner]
  int64_t size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
};

// InputError for a rank below 2 or a size below 1.
LrnShape lrn_shape(const std::vector<int64_t>& dims, int64_t size, float alpha, float beta, float bias);
void lrn(DType t, const LrnShape& s, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
