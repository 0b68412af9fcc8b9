// The extremum of a row and its index, as ArgMax/ArgMin pick it (arg_extremum.cuh): ties to the
// first index (the last with select_last_index), a NaN larger and smaller than any number (the
// first NaN wins, the last with select_last_index). Any visiting order gives the same winner, so a
// block may reduce its threads' candidates in any order; shared by ArgMax's kernels and the
// cross-entropy that also finds each row's ArgMax (cross_entropy.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace amp::cuda {

// Whether candidate (v, i) wins over (best, at): at < 0 is no candidate yet.
__device__ __forceinline__ bool arg_wins(float v, int64_t i, float best, int64_t at, bool max, bool last) {
  if (i < 0) return false;
  if (at < 0) return true;
  const bool v_nan = v != v, best_nan = best != best;
  if (v_nan || best_nan) {
    if (v_nan && best_nan) return last ? i > at : i < at;
    return v_nan;
  }
  if (v != best) return max ? v > best : v < best;
  return last ? i > at : i < at;
}

// The warp's winner, in every lane.
__device__ __forceinline__ void arg_warp_best(float& best, int64_t& at, bool max, bool last) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, at, offset);
    if (arg_wins(v, i, best, at, max, last)) {
      best = v;
      at = i;
    }
  }
}

// The block's winner (every thread's candidate taken), in thread 0; blockDim.x a multiple of 32
// of at most 1024. Calls __syncthreads: every thread of the block must call it.
__device__ __forceinline__ int64_t arg_block_best(float best, int64_t at, bool max, bool last) {
  __shared__ float values[32];
  __shared__ int64_t indices[32];
  arg_warp_best(best, at, max, last);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) {
    values[warp] = best;
    indices[warp] = at;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < static_cast<int>(blockDim.x / 32) ? values[lane] : 0.0f;
    at = lane < static_cast<int>(blockDim.x / 32) ? indices[lane] : -1;
    arg_warp_best(best, at, max, last);
  }
  return at;
}

}  // namespace amp::cuda
