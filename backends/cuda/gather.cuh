// Gather along an axis and its gradient, scatter-add: data seen as [outer, axis, inner], indices
// flattened to [m], the gathered tensor as [outer, m, inner]. Embedding lookups are outer = 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct GatherShape {
  int64_t outer = 1, axis = 0, inner = 1, m = 0;
  DType index_type = DType::kInt64;  // int32 or int64
  size_t elem_bytes = 4;             // gather copies bytes; scatter-add needs a float type
  DType type = DType::kFloat;
};

void gather(const GatherShape& s, const void* data, const void* indices, void* out, int sm_count, cudaStream_t stream);

size_t scatter_add_workspace(const GatherShape& s);
// ddata = zeros, then ddata[o, idx[j], i] += dy[o, j, i], summed in fp32.
void scatter_add(const GatherShape& s, const void* dy, const void* indices, void* ddata, void* workspace, int sm_count,
                 cudaStream_t stream);

}  // namespace amp::cuda
