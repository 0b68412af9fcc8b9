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

__device__ __forceinline__ bool finite_at(const void* p, unsigned char type, long long i, float scale) {
  float v;
  if (type == 0) v = static_cast<const float*>(p)[i];
  else if (type == 1) v = __half2float(static_cast<const __half*>(p)[i]);
  else v = __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return isfinite(__fmul_rn(v, scale));  // never contracted into anything else
}

__global__ void all_finite_kernel(TensorList list, const float* scale_ptr, bool* flag) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const float scale = scale_ptr ? *scale_ptr : 1.0f;
  for (int t = 0; t < list.count; ++t) {
    bool ok = true;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < list.n[t]; i += stride)
      ok = ok && finite_at(list.data[t], list.type[t], i, scale);
    // One store per warp that found something, not one per element.
    if (__any_sync(0xffffffffu, !ok) && threadIdx.x % 32 == 0) *flag = false;
  }
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
  const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((largest + 255) / 256, 4LL * sm_count)));
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
