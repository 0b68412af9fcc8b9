// See emulator_checks.cuh.
#include "tests/cuda_emulated/emulator_checks.cuh"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda::emulator_checks {
namespace {

__global__ void warp_intrinsics_kernel(const int* in, int* out) {
  const int t = threadIdx.x, lane = t % 32, v = in[t];
  int* o = out + 8 * t;
  int sum = v;
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  o[0] = sum;
  o[1] = __shfl_down_sync(0xffffffffu, v, 3);
  o[2] = __shfl_up_sync(0xffffffffu, v, 5, 16);
  o[3] = __shfl_sync(0xffffffffu, v, 7, 8);
  o[4] = static_cast<int>(__ballot_sync(0xffffffffu, v % 3 == 0));
  o[5] = __any_sync(0xffffffffu, v > 90);
  o[6] = __all_sync(0xffffffffu, v >= 0);
  __syncwarp();
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  int h = v;
  for (int offset = 8; offset > 0; offset >>= 1) h += __shfl_xor_sync(half, h, offset);
  o[7] = h;
}

__global__ void reverse_kernel(const int* in, int* out) {
  extern __shared__ int buffer[];
  const int* mine = in + blockIdx.x * blockDim.x;
  buffer[threadIdx.x] = mine[threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}

__global__ void count_kernel(const int* in, int* out, unsigned* counter) {
  const int c = __syncthreads_count(in[blockIdx.x * blockDim.x + threadIdx.x] > 0);
  if (threadIdx.x == 0) out[blockIdx.x] = c;
  atomicAdd(counter, 1u);
}

__global__ void __launch_bounds__(1024) block_sum_kernel(const float* in, float* out) {
  __shared__ float scratch[32];
  const float s = amp::cuda::block_sum(in[threadIdx.x], scratch);
  if (threadIdx.x == 0) out[0] = s;
}

__global__ void early_exit_kernel(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
}

__global__ void diverged_kernel(float* out) {
  float v;
  if (threadIdx.x % 2)
    v = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  else
    v = __shfl_xor_sync(0xffffffffu, 2.0f, 1);
  out[threadIdx.x] = v;
}

__global__ void barriers_kernel(float* out) {
  if (threadIdx.x < 32)
    __syncthreads();
  else
    __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void past_the_end_kernel(const float* in, float* out, int n) { out[threadIdx.x] = in[n + threadIdx.x]; }

__global__ void unwritten_kernel(float* out) {
  __shared__ float s[64];
  if (threadIdx.x < 32) s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
}

__global__ void no_barrier_kernel(const float* in, float* out) {
  __shared__ float s[256];
  s[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  out[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x];  // a __syncthreads belongs before this
}

__global__ void nothing_kernel(float* out) { out[threadIdx.x] = 0.0f; }

}  // namespace

void warp_intrinsics(const int* in, int* out) { warp_intrinsics_kernel<<<1, 64>>>(in, out); }
void reverse_in_shared(const int* in, int* out, int blocks, int threads) {
  reverse_kernel<<<blocks, threads, threads * sizeof(int)>>>(in, out);
}
void count_positive(const int* in, int* out, unsigned* counter, int blocks, int threads) {
  count_kernel<<<blocks, threads>>>(in, out, counter);
}
void block_sum(const float* in, float* out, int threads) { block_sum_kernel<<<1, threads>>>(in, out); }
void shuffle_after_a_lane_returned(float* out) { early_exit_kernel<<<1, 32>>>(out); }
void lanes_at_different_shuffles(float* out) { diverged_kernel<<<1, 32>>>(out); }
void threads_at_different_barriers(float* out) { barriers_kernel<<<1, 64>>>(out); }
void read_past_the_end(const float* in, float* out, int n) { past_the_end_kernel<<<1, 32>>>(in, out, n); }
void read_unwritten_shared(float* out, int blocks) { unwritten_kernel<<<blocks, 64>>>(out); }
void exchange_without_barrier(const float* in, float* out, int blocks) { no_barrier_kernel<<<blocks, 256>>>(in, out); }
void empty_grid() {
  nothing_kernel<<<0, 32>>>(nullptr);
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda::emulator_checks
