#include "backends/cuda/resize.cuh"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

struct Tap {
  int64_t i0, i1;
  double w;
};

// graph/ops/resize.cc's resize_taps for one output index, operation for operation.
__device__ Tap tap_of(const ResizeShape& s, int a, int64_t o) {
  const int64_t in = s.in[a], out = s.out[a];
  const double inverse = s.inverse[a], x = static_cast<double>(o);
  const double corners = out > 1 ? static_cast<double>(in - 1) / (s.resized[a] - 1) : 0.0;
  double src = 0;
  switch (s.coord) {
    case 0: src = inverse * (x + 0.5) - 0.5; break;                  // half_pixel
    case 1: src = out > 1 ? inverse * (x + 0.5) - 0.5 : 0.0; break;  // pytorch_half_pixel
    case 2: src = corners * x; break;                                // align_corners
    default: src = inverse * x; break;                               // asymmetric
  }
  Tap t{0, 0, 0.0};
  if (s.mode == 0) {  // nearest
    if (s.coord == 3 && s.nearest == 2) {
      if (in == out) src = x;
      else if (out == 2 * in) src = static_cast<double>(o >> 1);
      else src = static_cast<double>(floorf(static_cast<float>(o) * static_cast<float>(inverse)));
    }
    const double fl = floor(src);
    double r = fl;
    switch (s.nearest) {
      case 0: r = src == fl + 0.5 ? fl : round(src); break;      // round_prefer_floor
      case 1: r = src == fl + 0.5 ? fl + 1 : round(src); break;  // round_prefer_ceil
      case 2: r = fl; break;                                     // floor
      default: r = ceil(src); break;                             // ceil
    }
    int64_t i = static_cast<int64_t>(r);
    i = i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
    t.i0 = t.i1 = i;
    return t;
  }
  src = src < 0.0 ? 0.0 : src;
  int64_t i0 = static_cast<int64_t>(src);
  i0 = i0 > in - 1 ? in - 1 : i0;
  t.i0 = i0;
  t.i1 = i0 + 1 < in - 1 ? i0 + 1 : in - 1;
  t.w = t.i1 == t.i0 ? 0.0 : src - static_cast<double>(i0);
  return t;
}

template <class T>
__global__ void resize_kernel(ResizeShape s, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = e, base = 0, stride = 1;
    int64_t step[3];
    float w[3];
    int m = 0;
    int64_t coord[kMaxResizeRank];
    for (int a = s.rank - 1; a >= 0; --a) {
      coord[a] = rest % s.out[a];
      rest /= s.out[a];
    }
    // Row-major input strides, from the last axis.
    int64_t strides[kMaxResizeRank];
    for (int a = s.rank - 1; a >= 0; --a) {
      strides[a] = stride;
      stride *= s.in[a];
    }
    for (int a = 0; a < s.rank; ++a) {
      const Tap t = tap_of(s, a, coord[a]);
      base += t.i0 * strides[a];
      if (t.w != 0.0 && m < 3) {
        step[m] = (t.i1 - t.i0) * strides[a];
        w[m] = static_cast<float>(t.w);
        ++m;
      }
    }
    // Corner c's bit (m - 1 - j) picks the upper tap of the j-th interpolating axis; combining the
    // last axis first nests as (1 - w0) ((1 - w1) x00 + w1 x01) + w0 (...), the CPU's order.
    float v[8];
    for (int c = 0; c < (1 << m); ++c) {
      int64_t off = base;
      for (int j = 0; j < m; ++j)
        if (c & (1 << (m - 1 - j))) off += step[j];
      v[c] = to_float(x[off]);
    }
    for (int j = m - 1; j >= 0; --j)
      for (int p = 0; p < (1 << j); ++p) v[p] = (1.0f - w[j]) * v[2 * p] + w[j] * v[2 * p + 1];
    y[e] = from_float<T>(v[0]);
  }
}

}  // namespace

void resize(const ResizeShape& s, const void* x, void* y, int sm_count, cudaStream_t stream) {
  int64_t n = 1;
  for (int a = 0; a < s.rank; ++a) n *= s.out[a];
  if (n == 0) return;
  dispatch_float(s.type, "Resize", [&](auto tag) {
    using T = decltype(tag);
    resize_kernel<T><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(s, static_cast<const T*>(x), static_cast<T*>(y), n);
    AMP_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace amp::cuda
