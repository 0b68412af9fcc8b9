// fp16 and bf16 tensors widened to fp32, up to 16 in one launch (and one fp32 tensor narrowed back
// to 16 bits): a data-parallel bucket's
// gradients as the backward pass leaves them, written into the fp32 buffers NCCL then averages in
// place (collective_ops.cc). Left to a Cast unit of its own, each widening would be batched by the
// schedule with every other gradient's into one launch after the whole backward pass, and no
// bucket could start reducing before it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct Widening {
  DType dtype;  // kFloat16 or kBFloat16
  const void* in;
  float* out;
  int64_t n;
};

// Exact (every fp16 and bf16 value is an fp32 value); InputError for another type.
void widen_to_float(const std::vector<Widening>& tasks, int sm_count, cudaStream_t stream);

// The way back: n fp32 values rounded to nearest even into dtype (kFloat16 or kBFloat16; InputError
// for another): a 16-bit result computed in fp32 (convolution_ops.cc's widened weight gradients).
void narrow_from_float(DType dtype, const float* in, void* out, int64_t n, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
