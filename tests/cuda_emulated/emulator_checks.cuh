// Kernels that check the CUDA emulator itself (tests/support/cuda_emulator.h): warp intrinsics
// against their definitions, and what it must refuse — a shuffle a lane never reaches, lanes at
// different shuffles, threads at different barriers, a partial warp under a full mask, a read
// past a buffer — and what it must show: shared memory nobody wrote, a missing barrier. Compiled
// like backends/cuda/*.cu (rewritten launches, force-included prelude), in namespace
// amp::cuda::emulator_checks, which becomes amp::cuda_emulated::emulator_checks there.
#pragma once

#include <cuda_runtime.h>

namespace amp::cuda::emulator_checks {

// One block of 64 threads; out[8 * t + k] for thread t: k = 0 xor-butterfly sum over the warp,
// 1 __shfl_down_sync by 3, 2 __shfl_up_sync by 5 within 16 lanes, 3 __shfl_sync of lane 7
// within 8 lanes, 4 __ballot_sync(in % 3 == 0), 5 __any_sync(in > 90), 6 __all_sync(in >= 0),
// 7 a sum over the half warp under a half-warp mask.
void warp_intrinsics(const int* in, int* out);
// Blocks of `threads` threads reverse their slice of `in` through dynamic shared memory.
void reverse_in_shared(const int* in, int* out, int blocks, int threads);
// out[b] = number of threads of block b with in > 0 (__syncthreads_count); *counter += every thread.
void count_positive(const int* in, int* out, unsigned* counter, int blocks, int threads);
// float_types.cuh's block_sum over `threads` values (one block).
void block_sum(const float* in, float* out, int threads);

// Each of these is undefined behaviour on a GPU; the emulator throws amp_emu::Error.
void shuffle_after_a_lane_returned(float* out);
void lanes_at_different_shuffles(float* out);
void threads_at_different_barriers(float* out);
void read_past_the_end(const float* in, float* out, int n);  // reads in[n .. n + 31]
// And these run, computing what a GPU may compute: NaN where shared memory was not written.
void read_unwritten_shared(float* out, int blocks);        // 64 threads; out[64 * b + t]
void exchange_without_barrier(const float* in, float* out, int blocks);  // 256 threads, s[255 - t]
// A launch the runtime refuses (a grid of 0 blocks), then AMP_CUDA_CHECK(cudaGetLastError()).
void empty_grid();

}  // namespace amp::cuda::emulator_checks
