// ScatterND on the device: out = data, then each index tuple of indices[..., :k] writes (or adds,
// multiplies) its slice of `slice` elements of updates into out, as backends/cpu/scatter_nd.cc.
// reduction none runs every (tuple, element) in parallel and is the CPU's result even for repeated
// tuples: a first pass keeps, per destination slot, the last tuple that names it (an atomicMax of
// the tuple number into int32 scratch), and only that tuple writes. add and mul must apply the
// tuples in order to round as the CPU does: a thread per slice element walks the tuples one after
// another (parallel over the slice only; the zoo's ScatterND, Swin's mask, is reduction none).
// An index outside its axis cannot be reported from a kernel: its tuple is dropped.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

constexpr int kMaxScatterNDIndex = 8;  // k, the length of an index tuple

struct ScatterNDShape {
  int k = 0;
  int64_t dims[kMaxScatterNDIndex] = {};     // data's first k dims
  int64_t strides[kMaxScatterNDIndex] = {};  // in slices: slot = sum i_j * strides[j]
  int64_t tuples = 0, slice = 1, slots = 1;  // slots = product of dims[:k]
  int reduction = 0;                         // 0 none, 1 add, 2 mul
  DType type = DType::kFloat;                // none moves elem_bytes; add and mul compute in it
  size_t elem_bytes = 4;
};

// int32 scratch of one slot each, for reduction none.
size_t scatter_nd_workspace(const ScatterNDShape& s);
// indices are int64, [tuples, k] row-major; out may not be data (the op copies data first).
void scatter_nd(const ScatterNDShape& s, const void* data, const int64_t* indices, const void* updates, void* out,
                void* workspace, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
