// Widening of fp16/bf16 tensors to fp32, several per launch (widen.cuh): each thread walks every
// task of the list grid-stride, 8 elements a step (one 16-byte load, two 16-byte stores) where the
// task's pointers are 16-byte aligned, its last n % 8 one at a time; a bucket's tensors are a few
// KB to MB, so the launch is what a list of 16 saves. Narrowing back: one tensor, grid-stride, 8
// elements a step likewise. On an H100 (2026-11-27) the element-at-a-time kernel widened
// ResNet-50's weight-gradient operands (convolution_ops.cc) at 95 us a launch, 2.5 ms a step.
#include "backends/cuda/widen.cuh"

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kMaxWidenings = 16;

struct WideningTask {
  const void* in;
  float* out;
  long long n;
  int bf16;
  int vector;  // both pointers 16-byte aligned
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Elements [0, n / 8 * 8) eight at a time when vector, then the rest one at a time; thread
// `first` of `step` threads.
template <class In, class Out>
__device__ __forceinline__ void convert(const In* __restrict__ in, Out* __restrict__ out, long long n, bool vector,
                                        long long first, long long step) {
  long long done = 0;
  if (vector) {
    const long long groups = n / 8;
    for (long long g = first; g < groups; g += step) {
      float v[8];
      load8(in + 8 * g, v);
      store8(out + 8 * g, v);
    }
    done = groups * 8;
  }
  for (long long i = done + first; i < n; i += step) out[i] = from_float<Out>(to_float(in[i]));
}

struct WideningList {
  WideningTask task[kMaxWidenings];
  int count;
};


__global__ void widen_kernel(const __grid_constant__ WideningList list) {
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (int t = 0; t < list.count; ++t) {
    const WideningTask& w = list.task[t];
    if (w.bf16) convert(static_cast<const __nv_bfloat16*>(w.in), w.out, w.n, w.vector, first, step);
    else convert(static_cast<const __half*>(w.in), w.out, w.n, w.vector, first, step);
  }
}

template <class T>
__global__ void narrow_kernel(const float* in, T* out, long long n, int vector) {
  convert(in, out, n, vector, blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x,
          static_cast<long long>(gridDim.x) * blockDim.x);
}

// Threads for n elements: one per group of 8 where the pointers allow it.
int64_t threads_for(int64_t n, bool vector) { return vector ? (n + 7) / 8 : n; }

}  // namespace

void narrow_from_float(DType dtype, const float* in, void* out, int64_t n, int sm_count, cudaStream_t stream) {
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16)
    throw InputError("narrowing from float32 writes float16 or bfloat16, not " + std::string(dtype_name(dtype)));
  if (n == 0) return;
  const bool vector = aligned16(in) && aligned16(out);
  const unsigned blocks = grid_stride_blocks(threads_for(n, vector), sm_count);
  if (dtype == DType::kBFloat16)
    narrow_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n, vector);
  else
    narrow_kernel<__half><<<blocks, 256, 0, stream>>>(in, static_cast<__half*>(out), n, vector);
  AMP_CUDA_CHECK(cudaGetLastError());
}

void widen_to_float(const std::vector<Widening>& tasks, int sm_count, cudaStream_t stream) {
  for (size_t at = 0; at < tasks.size(); at += kMaxWidenings) {
    WideningList list{};
    int64_t most = 0;
    for (size_t k = at; k < std::min(tasks.size(), at + kMaxWidenings); ++k) {
      const Widening& w = tasks[k];
      if (w.dtype != DType::kFloat16 && w.dtype != DType::kBFloat16)
        throw InputError("widening to float32 reads float16 or bfloat16, not " + std::string(dtype_name(w.dtype)));
      const bool vector = aligned16(w.in) && aligned16(w.out);
      list.task[list.count++] =
          WideningTask{w.in, w.out, static_cast<long long>(w.n), w.dtype == DType::kBFloat16, vector};
      most = std::max(most, threads_for(w.n, vector));
    }
    if (most == 0) continue;
    widen_kernel<<<grid_stride_blocks(most, sm_count), 256, 0, stream>>>(list);
    AMP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace amp::cuda
