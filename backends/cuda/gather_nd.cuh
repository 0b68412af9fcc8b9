// GatherND on the device, as backends/cpu/gather_nd.cc: data [B..., D...] and indices
// [B..., M..., k] share their first b = batch_dims dims; each index tuple picks, within its batch,
// the slice of data's dims after b + k. A thread per output element (batch, tuple, slice element)
// reads its tuple (k loads, cached) and copies one element: slices of one tuple are contiguous
// in both tensors, so the copies coalesce. It moves bytes, so it takes every element type.
// An index outside its dim cannot be reported from a kernel (the CPU throws): its slice reads as
// zeros, as gather.cu's rows do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxGatherNDIndex = 8;  // k, the length of an index tuple

struct GatherNDShape {
  int k = 0;
  int64_t dims[kMaxGatherNDIndex] = {};     // data's dims b .. b + k
  int64_t strides[kMaxGatherNDIndex] = {};  // their strides in data, in elements
  int64_t batches = 1, tuples = 0, slice = 1, batch_stride = 0;  // tuples per batch
  size_t elem_bytes = 4;
};

// InputError for batch_dims outside [0, min(ranks)), k outside [1, rank - b] or above
// kMaxGatherNDIndex, batch dims that differ, or indices not int64 (ONNX's only index type here).
GatherNDShape gather_nd_shape(const std::vector<int64_t>& data, const std::vector<int64_t>& indices, int64_t batch_dims,
                              DType type, DType index_type);
void gather_nd(const GatherNDShape& s, const void* data, const int64_t* indices, void* out, int sm_count,
               cudaStream_t stream);

}  // namespace amp::cuda
