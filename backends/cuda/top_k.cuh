// TopK over one axis, viewed as [outer, extent, inner]: the k largest (smallest) elements of each
// lane and their int64 indices, best first, equal values by lower index first, a NaN above every
// number (below, for smallest) — a strict total order, so the result is the CPU kernel's
// (backends/cpu/top_k.cc) bit for bit, `sorted` 0 or 1 (both return sorted). Float, float16 and
// bfloat16 compare as fp32, which holds them exactly; double, int32 and int64 as themselves;
// values are copied, never converted. A block per lane takes k rounds, each the block's best of
// the elements that rank after the previous round's pick: k * extent / 256 reads a thread, fit
// for the detection heads' k of a few hundred and generation's k of tens over a vocabulary, slow
// for a full sort of a long axis. Its gradient (ScatterElements) is autodiff's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct TopKShape {
  int64_t outer = 1, extent = 0, inner = 1, k = 0;
  bool largest = true;
};

// InputError for a rank-0 input, an axis out of range, or k outside [0, the axis's extent].
TopKShape top_k_shape(const std::vector<int64_t>& dims, int64_t axis, int64_t k, bool largest);
// values: [outer, k, inner] of x's type; indices: the same, int64, or null.
void top_k(DType t, const TopKShape& s, const void* x, void* values, int64_t* indices, int sm_count,
           cudaStream_t stream);

}  // namespace amp::cuda
