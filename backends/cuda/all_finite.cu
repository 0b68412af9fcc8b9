// The all-finite check of a mixed-precision step: one pass over every gradient, no host round
// trip. The flag starts true and any thread that meets an inf or NaN clears it — every writer
// writes the same value, so the race is harmless and no reduction is needed. Tensors travel in
// the kernel's arguments, up to kPerLaunch per launch (apex's multi_tensor_apply approach):
// 4 KB of parameters hold 48 pointers and sizes, and a captured CUDA Graph keeps them as values.
// With a scale (AllFiniteScaled) each element is checked as x * scale rounded to float32, exactly
// the unscaled gradient the optimizer computes from it.
#include "backends/cuda/all_finite.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kPerLaunch = 48;

struct TensorList {
  const void* data[kPerLaunch];
  long long n[kPerLaunch];
  unsigned char type[kPerLaunch];  // 0 fp32, 1 fp16, 2 bf16
  int count;
};

__device__ __forceinline__ bool finite_scaled(float v, float scale) {
  return isfinite(__fmul_rn(v, scale));  // never contracted into anything else
}

// Whether every element of one tensor this thread visits is finite once scaled. Where the tensor
// is 16-byte aligned (the arena's buffers always are), eight elements a visit in one or two vector
// loads, two visits' loads issued before either is checked: one 2-byte load a thread at a time
// (the kernel before this one) kept too few bytes in flight to read GPT-2-small's 326 MB of bf16
// gradients faster than 0.55 TB/s on an H200 (589 us a step). The rest one element at a time.
template <class T>
__device__ __forceinline__ bool tensor_finite(const T* __restrict__ p, long long n, float scale, long long first,
                                              long long stride) {
  bool ok = true;
  long long done = 0;
  if ((reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull) {
    const long long groups = n / 8;
    long long g = first;
    for (; g + stride < groups; g += 2 * stride) {
      float a[8], b[8];
      load8(p + 8 * g, a);
      load8(p + 8 * (g + stride), b);
      for (int j = 0; j < 8; ++j) ok &= finite_scaled(a[j], scale) & finite_scaled(b[j], scale);
    }
    for (; g < groups; g += stride) {
      float a[8];
      load8(p + 8 * g, a);
      for (int j = 0; j < 8; ++j) ok &= finite_scaled(a[j], scale);
    }
    done = groups * 8;
  }
  for (long long i = done + first; i < n; i += stride) ok &= finite_scaled(to_float(p[i]), scale);
  return ok;
}

__global__ void all_finite_kernel(TensorList list, const float* scale_ptr, bool* flag) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const float scale = scale_ptr ? *scale_ptr : 1.0f;
  bool ok = true;
  for (int t = 0; t < list.count; ++t) {
    if (list.type[t] == 0)
      ok &= tensor_finite(static_cast<const float*>(list.data[t]), list.n[t], scale, first, stride);
    else if (list.type[t] == 1)
      ok &= tensor_finite(static_cast<const __half*>(list.data[t]), list.n[t], scale, first, stride);
    else
      ok &= tensor_finite(static_cast<const __nv_bfloat16*>(list.data[t]), list.n[t], scale, first, stride);
  }
  // One store per warp that found something, not one per element.
  if (__any_sync(0xffffffffu, !ok) && threadIdx.x % 32 == 0) *flag = false;
}

unsigned char type_code(DType t) {
  switch (t) {
    case DType::kFloat: return 0;
    case DType::kFloat16: return 1;
    case DType::kBFloat16: return 2;
    default: throw InputError("AllFinite checks float, float16 or bfloat16 tensors, not " + std::string(dtype_name(t)));
  }
}

}  // namespace

void all_finite(const std::vector<CheckedTensor>& tensors, const std::vector<const void*>& data, const float* scale,
                bool* flag, int sm_count, cudaStream_t stream) {
  AMP_CUDA_CHECK(cudaMemsetAsync(flag, 1, sizeof(bool), stream));
  int64_t largest = 0;
  for (const CheckedTensor& t : tensors) largest = std::max(largest, t.n);
  const unsigned blocks = grid_stride_blocks((largest + 7) / 8, sm_count);  // eight elements a thread's visit
  for (size_t first = 0; first < tensors.size(); first += kPerLaunch) {
    TensorList list{};
    for (size_t k = first; k < std::min(tensors.size(), first + kPerLaunch); ++k) {
      const int slot = list.count++;
      list.data[slot] = data[k];
      list.n[slot] = tensors[k].n;
      list.type[slot] = type_code(tensors[k].type);
    }
    all_finite_kernel<<<blocks, 256, 0, stream>>>(list, scale, flag);
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
