// Widening of fp16/bf16 tensors to fp32, several per launch (widen.cuh): each thread walks every
// task of the list grid-stride, one element a step; a bucket's tensors are a few KB to MB, so the
// launch, not the loads, is what a list of 16 saves. Narrowing back: one tensor, grid-stride.
#include "backends/cuda/widen.cuh"

#include <algorithm>

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
};

struct WideningList {
  WideningTask task[kMaxWidenings];
  int count;
};

template <class T>
__device__ __forceinline__ void widen_task(const WideningTask& w, long long first, long long step) {
  const T* in = static_cast<const T*>(w.in);
  for (long long i = first; i < w.n; i += step) w.out[i] = to_float(in[i]);
}

__global__ void widen_kernel(const __grid_constant__ WideningList list) {
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (int t = 0; t < list.count; ++t) {
    if (list.task[t].bf16) widen_task<__nv_bfloat16>(list.task[t], first, step);
    else widen_task<__half>(list.task[t], first, step);
  }
}

template <class T>
__global__ void narrow_kernel(const float* in, T* out, long long n) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += step)
    out[i] = from_float<T>(in[i]);
}

}  // namespace

void narrow_from_float(DType dtype, const float* in, void* out, int64_t n, int sm_count, cudaStream_t stream) {
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16)
    throw InputError("narrowing from float32 writes float16 or bfloat16, not " + std::string(dtype_name(dtype)));
  if (n == 0) return;
  if (dtype == DType::kBFloat16)
    narrow_kernel<__nv_bfloat16><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n);
  else
    narrow_kernel<__half><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(in, static_cast<__half*>(out), n);
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
      list.task[list.count++] = WideningTask{w.in, w.out, static_cast<long long>(w.n), w.dtype == DType::kBFloat16};
      most = std::max(most, w.n);
    }
    if (most == 0) continue;
    widen_kernel<<<grid_stride_blocks(most, sm_count), 256, 0, stream>>>(list);
    AMP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace amp::cuda
