// GridSample and GridSampleGrad on the device (grid_sample.cuh): grid-stride loops whose threads
// compute their grid point's taps (backends/cpu/grid_sample.cc's point_taps, operation for
// operation) and sum them over a channel's map (the forward), add dY into X's places (dX) or sum
// the weights' derivatives (dGrid).
#include "backends/cuda/grid_sample.cuh"

#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr double kCubicA = -0.75;  // PyTorch's bicubic (and ONNX's GridSample's)

// d(pixel coordinate) / d(grid value) goes to *slope (as the CPU's unnormalize).
__device__ __forceinline__ double unnormalize(double g, int64_t size, bool align_corners, double* slope) {
  const double s = static_cast<double>(size);
  if (align_corners) {
    *slope = __dsub_rn(s, 1.0) / 2.0;
    return __dmul_rn(__dadd_rn(g, 1.0) / 2.0, __dsub_rn(s, 1.0));
  }
  *slope = s / 2.0;
  return __dsub_rn(__dmul_rn(__dadd_rn(g, 1.0), s), 1.0) / 2.0;
}

__device__ __forceinline__ double clip(double x, int64_t size, double* slope) {
  const double top = static_cast<double>(size - 1);
  if (x <= 0) {
    *slope = 0;
    return 0;
  }
  if (x >= top) {
    *slope = 0;
    return top;
  }
  *slope = 1;
  return x;
}

__device__ __forceinline__ double reflect(double x, int64_t twice_low, int64_t twice_high, double* slope) {
  if (twice_low == twice_high) {
    *slope = 0;
    return 0;
  }
  const double low = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  double sign = 1;
  x = __dsub_rn(x, low);
  if (x < 0) {
    sign = -1;
    x = -x;
  }
  const double extra = fmod(x, span);
  const int64_t flips = static_cast<int64_t>(floor(x / span));
  if (flips % 2 == 0) {
    *slope = sign;
    return __dadd_rn(extra, low);
  }
  *slope = -sign;
  return __dadd_rn(__dsub_rn(span, extra), low);
}

__device__ __forceinline__ double pad_coordinate(const GridSampleShape& s, double x, int64_t size, double* slope) {
  *slope = 1;
  if (s.padding == 0) return x;
  double s_reflect = 1, s_clip = 1;
  if (s.padding == 2)
    x = s.align_corners ? reflect(x, 0, 2 * (size - 1), &s_reflect) : reflect(x, -1, 2 * size - 1, &s_reflect);
  x = clip(x, size, &s_clip);
  *slope = __dmul_rn(s_reflect, s_clip);
  return x;
}

// Not finite (x - x is then NaN) or out of int range: -100, outside every map.
__device__ __forceinline__ double in_int_range(double x) {
  return __dsub_rn(x, x) == 0.0 && x < 2147483646.0 && x > -2147483648.0 ? x : -100.0;
}

__device__ __forceinline__ int64_t position(double x, double y, int64_t height, int64_t width) {
  const int64_t ix = static_cast<int64_t>(x), iy = static_cast<int64_t>(y);
  return ix >= 0 && ix < width && iy >= 0 && iy < height ? iy * width + ix : -1;
}

// Cubic convolution weights at floor - 1 ... floor + 2 for fraction t, and their derivatives.
__device__ __forceinline__ void cubic_weights(double t, double w[4], double dw[4]) {
  const double A = kCubicA;
  auto near = [A](double d) { return __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn(__dmul_rn(A + 2, d), A + 3), d), d), 1.0); };
  auto far = [A](double d) {
    return __dsub_rn(__dmul_rn(__dadd_rn(__dmul_rn(__dsub_rn(__dmul_rn(A, d), 5 * A), d), 8 * A), d), 4 * A);
  };
  auto d_near = [A](double d) { return __dmul_rn(__dsub_rn(__dmul_rn(3 * (A + 2), d), 2 * (A + 3)), d); };
  auto d_far = [A](double d) { return __dadd_rn(__dmul_rn(__dsub_rn(__dmul_rn(3 * A, d), 10 * A), d), 8 * A); };
  w[0] = far(__dadd_rn(t, 1.0));
  w[1] = near(t);
  w[2] = near(__dsub_rn(1.0, t));
  w[3] = far(__dsub_rn(2.0, t));
  dw[0] = d_far(__dadd_rn(t, 1.0));
  dw[1] = d_near(t);
  dw[2] = -d_near(__dsub_rn(1.0, t));
  dw[3] = -d_far(__dsub_rn(2.0, t));
}

// One grid point's taps: up to 16 (position in one map, -1 outside; weight; its derivative along x
// and y), and d(pixel coordinate) / d(grid value) per axis: the CPU's point_taps.
struct Taps {
  int64_t pos[16];
  double w[16], dwx[16], dwy[16];
  int count = 0;
  double slope_x = 0, slope_y = 0;
};

__device__ __forceinline__ void point_taps(const GridSampleShape& s, double gx, double gy, Taps& t) {
  double x = unnormalize(gx, s.width, s.align_corners, &t.slope_x);
  double y = unnormalize(gy, s.height, s.align_corners, &t.slope_y);
  t.count = 0;
  if (s.mode == 2) {  // bicubic: 4 x 4 taps around the unmoved coordinate, each tap moved
    x = in_int_range(x);
    y = in_int_range(y);
    const double x0 = floor(x), y0 = floor(y);
    double wx[4], dwx[4], wy[4], dwy[4], unused;
    cubic_weights(__dsub_rn(x, x0), wx, dwx);
    cubic_weights(__dsub_rn(y, y0), wy, dwy);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const double tx = in_int_range(pad_coordinate(s, __dadd_rn(__dsub_rn(x0, 1.0), static_cast<double>(j)), s.width, &unused));
        const double ty = in_int_range(pad_coordinate(s, __dadd_rn(__dsub_rn(y0, 1.0), static_cast<double>(i)), s.height, &unused));
        t.pos[t.count] = position(tx, ty, s.height, s.width);
        t.w[t.count] = __dmul_rn(wx[j], wy[i]);
        t.dwx[t.count] = __dmul_rn(dwx[j], wy[i]);
        t.dwy[t.count] = __dmul_rn(wx[j], dwy[i]);
        ++t.count;
      }
    return;
  }
  double pad_x, pad_y;
  x = in_int_range(pad_coordinate(s, x, s.width, &pad_x));
  y = in_int_range(pad_coordinate(s, y, s.height, &pad_y));
  t.slope_x = __dmul_rn(t.slope_x, pad_x);
  t.slope_y = __dmul_rn(t.slope_y, pad_y);
  if (s.mode == 1) {  // nearest: rounded half to even
    t.pos[0] = position(rint(x), rint(y), s.height, s.width);
    t.w[0] = 1;
    t.dwx[0] = t.dwy[0] = 0;
    t.count = 1;
    t.slope_x = t.slope_y = 0;
    return;
  }
  const double x0 = floor(x), y0 = floor(y), x1 = __dadd_rn(x0, 1.0), y1 = __dadd_rn(y0, 1.0);
  const double east = __dsub_rn(x, x0), west = __dsub_rn(x1, x), south = __dsub_rn(y, y0), north = __dsub_rn(y1, y);
  const double xs[4] = {x0, x1, x0, x1}, ys[4] = {y0, y0, y1, y1};
  const double w[4] = {__dmul_rn(west, north), __dmul_rn(east, north), __dmul_rn(west, south), __dmul_rn(east, south)};
  const double dwx[4] = {-north, north, -south, south}, dwy[4] = {-west, -east, west, east};
  for (int k = 0; k < 4; ++k) {
    t.pos[k] = position(xs[k], ys[k], s.height, s.width);
    t.w[k] = w[k];
    t.dwx[k] = dwx[k];
    t.dwy[k] = dwy[k];
  }
  t.count = 4;
}

template <class T>
__device__ __forceinline__ double read(const T* p, int64_t at) {
  return static_cast<double>(to_float(p[at]));
}

// The CPU's convert<T>(double): float rounds once; float16 and bfloat16 round to fp32 to odd
// first (the inexact keep their sticky bit), so the second rounding is the only one.
__device__ __forceinline__ float round_to_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  if (back == d || d != d) return f;
  unsigned u = __float_as_uint(f);
  if (fabs(back) > fabs(d)) --u;
  return __uint_as_float(u | 1u);
}
template <class T>
__device__ __forceinline__ T from_double(double d) {
  if constexpr (std::is_same_v<T, float>) return static_cast<float>(d);
  else return from_float<T>(round_to_odd(d));
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
    Taps t;
    point_taps(s, read(grid, 2 * point), read(grid, 2 * point + 1), t);
    double acc = 0.0;
    for (int k = 0; k < t.count; ++k)
      if (t.pos[k] >= 0) acc = __dadd_rn(acc, __dmul_rn(t.w[k], read(map, t.pos[k])));
    y[e] = from_float<T>(static_cast<float>(acc));
  }
}

// dX: a thread per (n, c) map walks its batch entry's points in order and adds each dY element
// times its taps' weights into an fp64 map in the workspace (the CPU's order of additions for
// every element), then rounds it once.
template <class T, class G>
__global__ void __launch_bounds__(kThreads) grid_sample_dx_kernel(GridSampleShape s, const T* __restrict__ dy,
                                                                  const G* __restrict__ grid, double* __restrict__ acc,
                                                                  T* __restrict__ dx) {
  const int64_t maps = s.batch * s.channels, pixels = s.height * s.width, points = s.out_h * s.out_w;
  for (int64_t m = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; m < maps;
       m += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = m / s.channels;
    double* sum = acc + m * pixels;
    for (int64_t k = 0; k < pixels; ++k) sum[k] = 0.0;
    for (int64_t at = 0; at < points; ++at) {
      const int64_t point = b * points + at;
      Taps t;
      point_taps(s, read(grid, 2 * point), read(grid, 2 * point + 1), t);
      const double v = read(dy, m * points + at);
      for (int k = 0; k < t.count; ++k)
        if (t.pos[k] >= 0) sum[t.pos[k]] = __dadd_rn(sum[t.pos[k]], __dmul_rn(t.w[k], v));
    }
    for (int64_t k = 0; k < pixels; ++k) dx[m * pixels + k] = from_double<T>(sum[k]);
  }
}

// dGrid: a thread per grid point sums over the channels, in order, the weights' derivatives times
// X times dY, then times the coordinate's slope.
template <class T, class G>
__global__ void __launch_bounds__(kThreads) grid_sample_dgrid_kernel(GridSampleShape s, const T* __restrict__ dy,
                                                                     const T* __restrict__ x, const G* __restrict__ grid,
                                                                     G* __restrict__ dgrid) {
  const int64_t points = s.out_h * s.out_w, pixels = s.height * s.width, n = s.batch * points;
  for (int64_t point = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; point < n;
       point += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = point / points, at = point % points;
    Taps t;
    point_taps(s, read(grid, 2 * point), read(grid, 2 * point + 1), t);
    double gx = 0, gy = 0;
    for (int64_t c = 0; c < s.channels; ++c) {
      const T* map = x + (b * s.channels + c) * pixels;
      const double v = read(dy, (b * s.channels + c) * points + at);
      for (int k = 0; k < t.count; ++k) {
        if (t.pos[k] < 0) continue;
        const double value = read(map, t.pos[k]);
        gx = __dadd_rn(gx, __dmul_rn(__dmul_rn(t.dwx[k], value), v));
        gy = __dadd_rn(gy, __dmul_rn(__dmul_rn(t.dwy[k], value), v));
      }
    }
    dgrid[2 * point] = from_double<G>(__dmul_rn(gx, t.slope_x));
    dgrid[2 * point + 1] = from_double<G>(__dmul_rn(gy, t.slope_y));
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

void grid_sample_grad(DType x_type, DType grid_type, const GridSampleShape& s, const void* dy, const void* x,
                      const void* grid, void* dx, void* dgrid, void* workspace, int sm_count, cudaStream_t stream) {
  dispatch_float(x_type, "GridSampleGrad's X on cuda", [&](auto xt) {
    dispatch_float(grid_type, "GridSampleGrad's grid on cuda", [&](auto gt) {
      using T = decltype(xt);
      using G = decltype(gt);
      const int64_t maps = s.batch * s.channels, points = s.batch * s.out_h * s.out_w;
      if (dx && maps > 0)
        grid_sample_dx_kernel<T, G><<<grid_stride_blocks(maps, sm_count), kThreads, 0, stream>>>(
            s, static_cast<const T*>(dy), static_cast<const G*>(grid), static_cast<double*>(workspace), static_cast<T*>(dx));
      if (dgrid && points > 0)
        grid_sample_dgrid_kernel<T, G><<<grid_stride_blocks(points, sm_count), kThreads, 0, stream>>>(
            s, static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const G*>(grid), static_cast<G*>(dgrid));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
