// ReverseSequence on the device, as backends/cpu/reverse_sequence.cc: for each batch entry b the
// first sequence_lens[b] steps along the time axis reversed, the rest copied; time_axis and
// batch_axis are 0 and 1, either way round, and what follows them is a block moved whole. A
// thread per element of the output. It moves bytes, so it takes every element type.
// A length outside [0, steps] cannot be reported from a kernel (the CPU throws): that entry's
// elements read as zeros, as gather.cu's rows for an index outside the axis.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct ReverseSequenceShape {
  int64_t steps = 0, batch = 0, block = 1;  // block: elements after the first two dims
  bool time_major = true;                   // time_axis 0: [T, B, ...]; else [B, T, ...]
  DType lens_type = DType::kInt64;          // int32 or int64
  size_t elem_bytes = 4;
};

// InputError for a rank below 2, axes other than 0 and 1, or lengths not int32/int64.
ReverseSequenceShape reverse_sequence_shape(const std::vector<int64_t>& dims, int64_t time_axis, int64_t batch_axis,
                                            DType type, DType lens_type);
void reverse_sequence(const ReverseSequenceShape& s, const void* x, const void* lens, void* y, int sm_count,
                      cudaStream_t stream);

}  // namespace amp::cuda
