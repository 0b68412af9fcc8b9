// GatherElements and ScatterElements on the device, as backends/cpu/gather_elements.cc: each
// position p of `indices` (the data's rank, no larger than the data in the other dims) names the
// data element at p with its `axis` coordinate replaced by indices[p]; GatherElements reads it,
// ScatterElements writes updates[p] there (reduction none), or adds or multiplies it in (add,
// mul), into a copy of the data.
// Two positions can only name one element when they differ in nothing but their axis coordinate,
// so ScatterElements runs a thread per line of indices along the axis, walking the line in order:
// repeated indices then combine in the CPU's order (the last write wins, sums round as the CPU's
// do), with no scratch and no atomics, for every reduction and element type.
// An index outside [-extent, extent) cannot be reported from a kernel (the CPU throws): the
// gather reads zeros for it and the scatter drops it, as gather.cu and scatter_nd.cu do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxElementsRank = 8;

struct ElementsShape {
  int rank = 0, axis = 0;
  int64_t index_dims[kMaxElementsRank] = {};   // indices' (and updates', the gather's output) dims
  int64_t data_strides[kMaxElementsRank] = {};  // row-major strides of the data
  int64_t extent = 0;                           // the data's dim along axis
  int64_t positions = 0, data_elements = 0;     // numel of indices and of data
  DType index_type = DType::kInt64;             // int32 or int64
  DType type = DType::kFloat;                   // the data's
  int reduction = 0;                            // ScatterElements: 0 none, 1 add, 2 mul
};

// InputError (naming `op`) for a rank of 0 or above kMaxElementsRank, an axis out of range,
// indices of another rank or larger than the data off the axis, or indices not int32/int64.
ElementsShape elements_shape(const char* op, const std::vector<int64_t>& data, const std::vector<int64_t>& indices,
                             int64_t axis, DType type, DType index_type);
// out has indices' shape and data's type; any element type (bytes are moved).
void gather_elements(const ElementsShape& s, const void* data, const void* indices, void* out, int sm_count,
                     cudaStream_t stream);
// out has data's shape (copied from data first unless it is data); updates have indices' shape.
void scatter_elements(const ElementsShape& s, const void* data, const void* indices, const void* updates, void* out,
                      int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
