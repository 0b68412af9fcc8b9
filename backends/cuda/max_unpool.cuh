// MaxUnpool(X, I): zeros, with each X element written at its index in I, which counts over the
// whole flattened unpooled tensor (N and C included), as MaxPool's Indices do; an output_shape
// larger than the unpooled tensor places it at the output's start. A repeated index keeps the
// last write, as the CPU kernel's loop (backends/cpu/max_unpool.cc): a first pass keeps, per
// output element, the highest X position that names it (a 64-bit atomicMax into scratch), a
// second writes every output element from it or 0, so the result is the CPU's bit for bit.
// Elements move as bytes (float, float16, bfloat16, double). An index outside the unpooled tensor
// (or its place outside output_shape) cannot be reported from a kernel, where the CPU refuses it:
// it is dropped.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxUnpoolRank = 8;

struct MaxUnpoolShape {
  int64_t inputs = 0, outputs = 0;  // elements of X (and I), of Y
  bool placed = false;              // Y's dims differ from the unpooled ones: indices are re-placed
  int rank = 0;
  int64_t unpooled[kMaxUnpoolRank] = {}, out[kMaxUnpoolRank] = {};
  size_t elem_bytes = 4;
};

// The unpooled dims from X's and the attributes, as the CPU computes them; InputError for a rank
// below 3 or above kMaxUnpoolRank, I's dims not X's, or Y of another rank.
MaxUnpoolShape max_unpool_shape(DType t, const std::vector<int64_t>& x, const std::vector<int64_t>& indices,
                                const std::vector<int64_t>& out, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& strides, const std::vector<int64_t>& pads);
// Bytes of scratch the op needs (one uint64 an output element).
size_t max_unpool_workspace(const MaxUnpoolShape& s);
void max_unpool(const MaxUnpoolShape& s, const void* x, const int64_t* indices, void* y, void* workspace,
                int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
