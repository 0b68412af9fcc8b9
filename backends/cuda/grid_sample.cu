// GridSample on the device (grid_sample.cuh): a grid-stride loop over the output elements; each
// thread computes its grid point's taps (backends/cpu/grid_sample.cc's point_taps, operation for
// operation) and sums them over its channel's map.
#include "backends/cuda/grid_sample.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr double kCubicA = -0.75;  // PyTorch's bicubic (and ONNX's GridSample's)

__device__ __forceinline__ double unnormalize(double g, int64_t size, bool align_corners) {
  const double s = static_cast<double>(size);
  if (align_corners) return __dmul_rn(__dadd_rn(g, 1.0) / 2.0, __dsub_rn(s, 1.0));
  return __dsub_rn(__dmul_rn(__dadd_rn(g, 1.0), s), 1.0) / 2.0;
}

__device__ __forceinline__ double clip(double x, int64_t size) {
  const double top = static_cast<double>(size - 1);
  if (x <= 0) return 0;
  if (x >= top) return top;
  return x;
}

__device__ __forceinline__ double reflect(double x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double low = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  x = __dsub_rn(x, low);
  if (x < 0) x = -x;
  const double extra = fmod(x, span);
  const int64_t flips = static_cast<int64_t>(floor(x / span));
  if (flips % 2 == 0) return __dadd_rn(extra, low);
  return __dadd_rn(__dsub_rn(span, extra), low);
}

__device__ __forceinline__ double pad_coordinate(const GridSampleShape& s, double x, int64_t size) {
  if (s.padding == 0) return x;
  if (s.padding == 2) x = s.align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
  return clip(x, size);
}

// Not finite (x - x is then NaN) or out of int range: -100, outside every map.
__device__ __forceinline__ double in_int_range(double x) {
  return __dsub_rn(x, x) == 0.0 && x < 2147483646.0 && x > -2147483648.0 ? x : -100.0;
}

__device__ __forceinline__ int64_t position(double x, double y, int64_t height, int64_t width) {
  const int64_t ix = static_cast<int64_t>(x), iy = static_cast<int64_t>(y);
  return ix >= 0 && ix < width && iy >= 0 && iy < height ? iy * width + ix : -1;
}

__device__ __forceinline__ double cubic_near(double d) {  // |d| <= 1
  const double A = kCubicA;
  return __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn(__dmul_rn(A + 2, d), A + 3), d), d), 1.0);
}

__device__ __forceinline__ double cubic_far(double d) {  // 1 < |d| < 2
  const double A = kCubicA;
  return __dsub_rn(__dmul_rn(__dadd_rn(__dmul_rn(__dsub_rn(__dmul_rn(A, d), 5 * A), d), 8 * A), d), 4 * A);
}

__device__ __forceinline__ void cubic_weights(double t, double w[4]) {
  w[0] = cubic_far(__dadd_rn(t, 1.0));
  w[1] = cubic_near(t);
  w[2] = cubic_near(__dsub_rn(1.0, t));
  w[3] = cubic_far(__dsub_rn(2.0, t));
}

template <class T>
__device__ __forceinline__ double read(const T* map, int64_t pos) {
  return static_cast<double>(to_float(map[pos]));
}

template <class T, class G>
__global__ void __launch_bounds__(kThreads) grid_sample_kernel(GridSampleShape s, const T* __restrict__ x,
                                                               const G* __restrict__ grid, T* __restrict__ y) {
  const int64_t n = s.batch * s.channels * s.out_h * s.out_w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = e % (s.out_h * s.out_w), c = e / (s.out_h * s.out_w) % s.channels;
    const int64_t b = e / (s.out_h * s.out_w * s.channels);
    const int64_t point = b * s.out_h * s.out_w + at;
    const T* map = x + (b * s.channels + c) * s.height * s.width;
    const double gx = static_cast<double>(to_float(grid[2 * point])), gy = static_cast<double>(to_float(grid[2 * point + 1]));
    double px = unnormalize(gx, s.width, s.align_corners), py = unnormalize(gy, s.height, s.align_corners);
    double acc = 0.0;
    if (s.mode == 2) {  // bicubic: 4 x 4 taps around the unmoved coordinate, each tap moved
      px = in_int_range(px);
      py = in_int_range(py);
      const double x0 = floor(px), y0 = floor(py);
      double wx[4], wy[4];
      cubic_weights(__dsub_rn(px, x0), wx);
      cubic_weights(__dsub_rn(py, y0), wy);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const double tx = in_int_range(pad_coordinate(s, __dadd_rn(__dsub_rn(x0, 1.0), static_cast<double>(j)), s.width));
          const double ty = in_int_range(pad_coordinate(s, __dadd_rn(__dsub_rn(y0, 1.0), static_cast<double>(i)), s.height));
          const int64_t pos = position(tx, ty, s.height, s.width);
          if (pos >= 0) acc = __dadd_rn(acc, __dmul_rn(__dmul_rn(wx[j], wy[i]), read(map, pos)));
        }
    } else {
      px = in_int_range(pad_coordinate(s, px, s.width));
      py = in_int_range(pad_coordinate(s, py, s.height));
      if (s.mode == 1) {  // nearest: rounded half to even
        const int64_t pos = position(rint(px), rint(py), s.height, s.width);
        if (pos >= 0) acc = __dadd_rn(acc, __dmul_rn(1.0, read(map, pos)));
      } else {
        const double x0 = floor(px), y0 = floor(py), x1 = __dadd_rn(x0, 1.0), y1 = __dadd_rn(y0, 1.0);
        const double east = __dsub_rn(px, x0), west = __dsub_rn(x1, px), south = __dsub_rn(py, y0),
                     north = __dsub_rn(y1, py);
        const double xs[4] = {x0, x1, x0, x1}, ys[4] = {y0, y0, y1, y1};
        const double w[4] = {__dmul_rn(west, north), __dmul_rn(east, north), __dmul_rn(west, south), __dmul_rn(east, south)};
        for (int k = 0; k < 4; ++k) {
          const int64_t pos = position(xs[k], ys[k], s.height, s.width);
          if (pos >= 0) acc = __dadd_rn(acc, __dmul_rn(w[k], read(map, pos)));
        }
      }
    }
    y[e] = from_float<T>(static_cast<float>(acc));
  }
}

}  // namespace

void grid_sample(DType x_type, DType grid_type, const GridSampleShape& s, const void* x, const void* grid, void* y,
                 int sm_count, cudaStream_t stream) {
  const int64_t n = s.batch * s.channels * s.out_h * s.out_w;
  if (n == 0) return;
  dispatch_float(x_type, "GridSample's X on cuda", [&](auto xt) {
    dispatch_float(grid_type, "GridSample's grid on cuda", [&](auto gt) {
      using T = decltype(xt);
      using G = decltype(gt);
      grid_sample_kernel<T, G><<<grid_stride_blocks(n, sm_count), kThreads, 0, stream>>>(
          s, static_cast<const T*>(x), static_cast<const G*>(grid), static_cast<T*>(y));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
