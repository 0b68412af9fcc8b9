// ArgMax / ArgMin over one axis of a float, float16 or bfloat16 tensor viewed as [outer, r, inner]:
// the int64 index of the largest (smallest) element of each lane, ties to the first index (the
// last with select_last_index), a NaN larger and smaller than any number (the first NaN wins, the
// last with select_last_index), as the CPU kernel (backends/cpu/arg_extremum.cc), numpy and
// torch.argmax. With inner = 1 a block per lane reads it contiguously (a language model's
// predicted token over its vocabulary); else a thread per lane, consecutive threads on
// consecutive inner positions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

struct ArgExtremumShape {
  int64_t outer = 1, r = 1, inner = 1;
  bool max = true;   // ArgMax, else ArgMin
  bool last = false;  // select_last_index
  // With inner = 1, elements from one lane to the next: r when 0; more for rows stored padded
  // (TensorDesc::row_pitch).
  int64_t pitch = 0;
};

void arg_extremum(DType t, const ArgExtremumShape& s, const void* x, int64_t* out, cudaStream_t stream);
// Hardmax (opset 13) from ArgMax's indices (max, first): y of type t is 1 at index at[lane] of
// each lane, 0 elsewhere — the CPU kernel's (backends/cpu/hardmax.cc) first largest, a NaN the
// largest, bit for bit.
void one_hot_at(DType t, const ArgExtremumShape& s, const int64_t* at, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
