#include "backends/cuda/max_pool_grad.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

template <class I>
__device__ __forceinline__ I smaller(I a, I b) { return a < b ? a : b; }

template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    max_pool_grad_nhwc(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx, I n, I c, I h, I w,
                       I out_h, I out_w, I kernel_h, I kernel_w, I stride_h, I stride_w, I pad_h, I pad_w) {
  const I groups = c / 8, vectors = n * h * w * groups;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I v = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; v < vectors; v += step) {
    const I c0 = (v % groups) * 8, pos = v / groups;
    const I col = pos % w, row = (pos / w) % h, image = pos / (w * h);
    const T* plane = x + image * h * w * c + c0;  // position p of this image's channels c0.. at plane + p * c
    const I here = row * w + col;
    // The windows covering (row, col): oh * stride - pad <= row <= oh * stride - pad + kernel - 1.
    const I first_h = row + pad_h + 1 > kernel_h ? (row + pad_h + 1 - kernel_h + stride_h - 1) / stride_h : 0;
    const I last_h = smaller((row + pad_h) / stride_h, out_h - 1);
    const I first_w = col + pad_w + 1 > kernel_w ? (col + pad_w + 1 - kernel_w + stride_w - 1) / stride_w : 0;
    const I last_w = smaller((col + pad_w) / stride_w, out_w - 1);
    float acc[8] = {};
    for (I oh = first_h; oh <= last_h; ++oh)
      for (I ow = first_w; ow <= last_w; ++ow) {
        // The window's arg-max per channel, as the CPU kernel finds it.
        const I r0 = oh * stride_h - pad_h, q0 = ow * stride_w - pad_w;
        const I r_lo = r0 > 0 ? r0 : 0, r_hi = smaller(r0 + kernel_h, h);
        const I q_lo = q0 > 0 ? q0 : 0, q_hi = smaller(q0 + kernel_w, w);
        float best[8];
        I arg[8];
        for (int j = 0; j < 8; ++j) arg[j] = static_cast<I>(-1);
        bool any = false;
        for (I r = r_lo; r < r_hi; ++r)
          for (I q = q_lo; q < q_hi; ++q) {
            float v8[8];
            load8(plane + (r * w + q) * c, v8);
            for (int j = 0; j < 8; ++j) {
              const bool take = !any || v8[j] > best[j] || v8[j] != v8[j];
              if (take) {
                best[j] = v8[j];
                arg[j] = r * w + q;
              }
            }
            any = true;
          }
        bool mine = false;
        for (int j = 0; j < 8; ++j) mine |= any && arg[j] == here;
        if (!mine) continue;
        float g[8];
        load8(dy + ((image * out_h + oh) * out_w + ow) * c + c0, g);
        for (int j = 0; j < 8; ++j)
          if (arg[j] == here) acc[j] += g[j];
      }
    store8(dx + pos * c + c0, acc);
  }
}

}  // namespace

bool max_pool_grad_channels_last_fits(const MaxPoolGrad2d& a) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.c > 0 && a.c % 8 == 0 && aligned(a.dy) && aligned(a.x) && aligned(a.dx) &&
         (a.t == DType::kFloat || a.t == DType::kFloat16 || a.t == DType::kBFloat16);
}

void max_pool_grad_channels_last(const MaxPoolGrad2d& a, int sm_count, cudaStream_t stream) {
  if (!max_pool_grad_channels_last_fits(a)) throw Error("internal: MaxPoolGrad's channels-last kernel takes C % 8 == 0, aligned");
  const int64_t total = a.n * a.c * a.h * a.w;
  if (total == 0) return;
  const int64_t vectors = total / 8;
  dispatch_float(a.t, "MaxPoolGrad", [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = grid_stride_blocks(vectors, sm_count);
    const T* dy = static_cast<const T*>(a.dy);
    const T* x = static_cast<const T*>(a.x);
    T* dx = static_cast<T*>(a.dx);
    // 32-bit indices below 2^31 elements (a 64-bit division is a long software sequence).
    if (total < (int64_t{1} << 31) && a.n * a.c * a.out_h * a.out_w < (int64_t{1} << 31)) {
      using I = int32_t;
      max_pool_grad_nhwc<T, I><<<grid, kThreads, 0, stream>>>(
          dy, x, dx, static_cast<I>(a.n), static_cast<I>(a.c), static_cast<I>(a.h), static_cast<I>(a.w),
          static_cast<I>(a.out_h), static_cast<I>(a.out_w), static_cast<I>(a.kernel_h), static_cast<I>(a.kernel_w),
          static_cast<I>(a.stride_h), static_cast<I>(a.stride_w), static_cast<I>(a.pad_h), static_cast<I>(a.pad_w));
    } else {
      max_pool_grad_nhwc<T, int64_t><<<grid, kThreads, 0, stream>>>(dy, x, dx, a.n, a.c, a.h, a.w, a.out_h, a.out_w,
                                                                     a.kernel_h, a.kernel_w, a.stride_h, a.stride_w,
                                                                     a.pad_h, a.pad_w);
    }
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
