// CumSum on the device: running sums along one axis, inclusive or exclusive, forward or reversed,
// bit for bit the CPU kernel's (backends/cpu/cumsum.cc): one thread per line [outer, inner] walks
// its line in order, float, float16 and bfloat16 summing in fp32 (each output rounded once from
// the running fp32 sum), double in fp64, int32/int64/uint32/uint64 in their own type (wrapping).
// A scan would be faster on long lines but would round in another order; the lines are many
// where it matters (position ids: [batch, sequence] along the sequence is a line per batch entry,
// its gradient the same reversed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct CumSumShape {
  int64_t outer = 1, extent = 1, inner = 1;  // x as [outer, extent, inner], summed along extent
  bool exclusive = false, reverse = false;
};

// x's type and dims and the axis (negative from the back); InputError when the axis is out of
// range or the type one the CPU kernel does not take.
CumSumShape cumsum_shape(DType t, const std::vector<int64_t>& dims, int64_t axis, bool exclusive, bool reverse);
void cumsum(DType t, const CumSumShape& s, const void* x, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
