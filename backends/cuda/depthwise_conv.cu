#include "backends/cuda/depthwise_conv.cuh"

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

struct Geometry {
  int64_t n, c, h, w, out_h, out_w, stride_h, stride_w, pad_h, pad_w;
};

Geometry geometry_of(const DepthwiseConv2d& g) {
  return {g.n, g.c, g.h, g.w, g.out_h, g.out_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w};
}

// f(tap, offset) for each tap kh * KW + kw of the KH x KW window at (h0, w0) that lies inside an
// h x w plane, offset = the plane position it reads.
template <int KH, int KW, class F>
__device__ __forceinline__ void for_taps(int64_t h0, int64_t w0, int64_t h, int64_t w, F&& f) {
#pragma unroll
  for (int kh = 0; kh < KH; ++kh) {
    const int64_t ih = h0 + kh;
    if (ih < 0 || ih >= h) continue;
#pragma unroll
    for (int kw = 0; kw < KW; ++kw) {
      const int64_t iw = w0 + kw;
      if (iw < 0 || iw >= w) continue;
      f(kh * KW + kw, ih * w + iw);
    }
  }
}

// f(i, col, row, plane) for each element i of [planes, rows, cols] this thread's grid-stride loop
// takes.
template <class F>
__device__ __forceinline__ void for_plane_elements(int64_t planes, int64_t rows, int64_t cols, F&& f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < planes * rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(i, i % cols, (i / cols) % rows, i / (cols * rows));
}

// A thread per output element (n, c, oh, ow), ow fastest: neighbouring threads read neighbouring
// inputs.
template <class T, int KH, int KW>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
                   Geometry g) {
  for_plane_elements(g.n * g.c, g.out_h, g.out_w, [&](int64_t i, int64_t ow, int64_t oh, int64_t plane) {
    const int64_t c = plane % g.c;
    const T* in = x + plane * g.h * g.w;
    const T* filter = w + c * KH * KW;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    float acc = 0.0f;
    for_taps<KH, KW>(h0, w0, g.h, g.w, [&](int tap, int64_t at) { acc += to_float(in[at]) * to_float(filter[tap]); });
    if (bias) acc += to_float(bias[c]);
    y[i] = from_float<T>(acc);
  });
}

// A thread per input element (n, c, ih, iw): the output positions whose windows read it, taps in
// order.
template <class T, int KH, int KW>
__global__ void __launch_bounds__(kThreads)
    backward_data_kernel(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx, Geometry g) {
  for_plane_elements(g.n * g.c, g.h, g.w, [&](int64_t i, int64_t iw, int64_t ih, int64_t plane) {
    const int64_t c = plane % g.c;
    const T* grad = dy + plane * g.out_h * g.out_w;
    const T* filter = w + c * KH * KW;
    float acc = 0.0f;
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
      const int64_t t = ih + g.pad_h - kh;  // oh * stride
      if (t < 0 || t % g.stride_h != 0 || t / g.stride_h >= g.out_h) continue;
      const int64_t oh = t / g.stride_h;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        const int64_t u = iw + g.pad_w - kw;
        if (u < 0 || u % g.stride_w != 0 || u / g.stride_w >= g.out_w) continue;
        acc += to_float(grad[oh * g.out_w + u / g.stride_w]) * to_float(filter[kh * KW + kw]);
      }
    }
    dx[i] = from_float<T>(acc);
  });
}

// Blocks of channel c's part `part`: the output positions (n, oh, ow) of channel c from
// part * per_part on, thread t taking every kThreads-th; each thread sums dy * x for every tap in
// registers, then the block adds its threads' sums tap by tap (warp shuffles, then the warps in
// order) into partial[part][c][tap].
template <class T, int KH, int KW>
__global__ void __launch_bounds__(kThreads)
    filter_partials(const T* __restrict__ dy, const T* __restrict__ x, Geometry g, int64_t parts,
                    float* __restrict__ partial) {
  constexpr int kTaps = KH * KW;
  __shared__ float warp_sums[kThreads / 32][kTaps];
  const int64_t c = blockIdx.x / parts, part = blockIdx.x % parts;
  const int64_t positions = g.n * g.out_h * g.out_w, per_part = (positions + parts - 1) / parts;
  const int64_t first = part * per_part, last = first + per_part < positions ? first + per_part : positions;
  float acc[kTaps];
#pragma unroll
  for (int k = 0; k < kTaps; ++k) acc[k] = 0.0f;
  for (int64_t p = first + threadIdx.x; p < last; p += blockDim.x) {
    const int64_t ow = p % g.out_w, oh = (p / g.out_w) % g.out_h, image = p / (g.out_w * g.out_h);
    const int64_t plane = image * g.c + c;
    const float d = to_float(dy[plane * g.out_h * g.out_w + oh * g.out_w + ow]);
    const T* in = x + plane * g.h * g.w;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    for_taps<KH, KW>(h0, w0, g.h, g.w, [&](int tap, int64_t at) { acc[tap] += d * to_float(in[at]); });
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k < kTaps; ++k) {
    const float s = warp_sum(acc[k]);
    if (lane == 0) warp_sums[warp][k] = s;
  }
  __syncthreads();
  for (int k = threadIdx.x; k < kTaps; k += blockDim.x) {
    float total = 0.0f;
    for (int v = 0; v < kThreads / 32; ++v) total += warp_sums[v][k];
    partial[(part * g.c + c) * kTaps + k] = total;
  }
}

// dw[c][tap] = the parts' sums added in order, rounded once.
template <class T>
__global__ void filter_totals(const float* __restrict__ partial, int64_t parts, int64_t channels, int taps,
                              T* __restrict__ dw) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < channels * taps;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float total = 0.0f;
    for (int64_t p = 0; p < parts; ++p) total += partial[p * channels * taps + i];
    dw[i] = from_float<T>(total);
  }
}

// Parts each channel's output positions are cut into: about 4 blocks an SM in all, each part at
// least 1024 positions.
int64_t filter_parts(const DepthwiseConv2d& g, int sm_count) {
  const int64_t positions = g.n * g.out_h * g.out_w;
  const int64_t want = (4LL * std::max(sm_count, 1) + g.c - 1) / g.c;
  return std::max<int64_t>(1, std::min(want, (positions + 1023) / 1024));
}

// f(T{}, KH, KW) for g's type and filter size.
template <class F>
void dispatch(const DepthwiseConv2d& g, const char* what, F&& f) {
  dispatch_float(g.t, what, [&](auto tag) {
    if (g.kernel_h == 3 && g.kernel_w == 3) f(tag, std::integral_constant<int, 3>{});
    else if (g.kernel_h == 5 && g.kernel_w == 5) f(tag, std::integral_constant<int, 5>{});
    else if (g.kernel_h == 7 && g.kernel_w == 7) f(tag, std::integral_constant<int, 7>{});
    else throw Error("internal: no depthwise kernel for a " + std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " filter");
  });
}

}  // namespace

bool depthwise_conv_fits(const DepthwiseConv2d& g) {
  const bool size = g.kernel_h == g.kernel_w && (g.kernel_h == 3 || g.kernel_h == 5 || g.kernel_h == 7);
  const bool type = g.t == DType::kFloat || g.t == DType::kFloat16 || g.t == DType::kBFloat16;
  return size && type && g.n > 0 && g.c > 0 && g.h > 0 && g.w > 0 && g.out_h > 0 && g.out_w > 0 && g.stride_h > 0 &&
         g.stride_w > 0;
}

void depthwise_conv_forward(const DepthwiseConv2d& g, const void* x, const void* w, const void* bias, void* y,
                            int sm_count, cudaStream_t stream) {
  dispatch(g, "Conv", [&](auto tag, auto k) {
    using T = decltype(tag);
    constexpr int K = decltype(k)::value;
    forward_kernel<T, K, K><<<grid_stride_blocks(g.n * g.c * g.out_h * g.out_w, sm_count), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<T*>(y),
        geometry_of(g));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void depthwise_conv_backward_data(const DepthwiseConv2d& g, const void* dy, const void* w, void* dx, int sm_count,
                                  cudaStream_t stream) {
  dispatch(g, "ConvGrad", [&](auto tag, auto k) {
    using T = decltype(tag);
    constexpr int K = decltype(k)::value;
    backward_data_kernel<T, K, K><<<grid_stride_blocks(g.n * g.c * g.h * g.w, sm_count), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), geometry_of(g));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

size_t depthwise_conv_backward_filter_workspace(const DepthwiseConv2d& g, int sm_count) {
  return static_cast<size_t>(filter_parts(g, sm_count) * g.c * g.kernel_h * g.kernel_w) * sizeof(float);
}

void depthwise_conv_backward_filter(const DepthwiseConv2d& g, const void* dy, const void* x, void* dw, void* workspace,
                                    int sm_count, cudaStream_t stream) {
  const int64_t parts = filter_parts(g, sm_count);
  float* partial = static_cast<float*>(workspace);
  dispatch(g, "ConvGrad", [&](auto tag, auto k) {
    using T = decltype(tag);
    constexpr int K = decltype(k)::value;
    filter_partials<T, K, K><<<static_cast<unsigned>(g.c * parts), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), geometry_of(g), parts, partial);
    filter_totals<T><<<grid_stride_blocks(g.c * K * K, sm_count), kThreads, 0, stream>>>(partial, parts, g.c, K * K,
                                                                                          static_cast<T*>(dw));
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
