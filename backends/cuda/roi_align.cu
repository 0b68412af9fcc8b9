// RoiAlign on the device (roi_align.cuh): a grid-stride loop over the output elements; each thread
// recomputes its region's geometry (a few fp64 operations) and the bilinear taps of its bin's
// samples, as the CPU does once per region.
#include "backends/cuda/roi_align.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double larger(double a, double b) { return a < b ? b : a; }  // std::max

// One sample's sum of weighted corners (avg) or their largest (max). Off the map every weight is 0
// on the first element, as the CPU's taps have it: 0 times a negative value is -0, which max keeps.
template <class T>
__device__ __forceinline__ double sample(const T* map, int64_t height, int64_t width, double y, double x, bool max) {
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) {
    const double v = __dmul_rn(0.0, static_cast<double>(to_float(map[0])));
    return max ? v : __dadd_rn(__dadd_rn(__dadd_rn(v, v), v), v);
  }
  y = larger(y, 0.0);
  x = larger(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = __dsub_rn(y, static_cast<double>(y_low)), lx = __dsub_rn(x, static_cast<double>(x_low));
  const double hy = __dsub_rn(1.0, ly), hx = __dsub_rn(1.0, lx);
  const double v0 = __dmul_rn(__dmul_rn(hy, hx), static_cast<double>(to_float(map[y_low * width + x_low])));
  const double v1 = __dmul_rn(__dmul_rn(hy, lx), static_cast<double>(to_float(map[y_low * width + x_high])));
  const double v2 = __dmul_rn(__dmul_rn(ly, hx), static_cast<double>(to_float(map[y_high * width + x_low])));
  const double v3 = __dmul_rn(__dmul_rn(ly, lx), static_cast<double>(to_float(map[y_high * width + x_high])));
  if (max) return larger(larger(v0, v1), larger(v2, v3));
  return __dadd_rn(__dadd_rn(__dadd_rn(v0, v1), v2), v3);
}

template <class T>
__global__ void __launch_bounds__(kThreads) roi_align_kernel(RoiAlignShape s, const T* __restrict__ x,
                                                             const T* __restrict__ rois,
                                                             const int64_t* __restrict__ batch_indices, T* __restrict__ y) {
  const int64_t n = s.rois * s.channels * s.out_h * s.out_w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pw = e % s.out_w, ph = e / s.out_w % s.out_h, c = e / (s.out_w * s.out_h) % s.channels;
    const int64_t r = e / (s.out_w * s.out_h * s.channels);
    const int64_t b = batch_indices[r];
    if (b < 0 || b >= s.batch) {
      y[e] = from_float<T>(0.0f);
      continue;
    }
    const double offset = s.half_pixel ? 0.5 : 0.0, scale = static_cast<double>(s.spatial_scale);
    const double x1 = __dsub_rn(__dmul_rn(static_cast<double>(to_float(rois[r * 4])), scale), offset);
    const double y1 = __dsub_rn(__dmul_rn(static_cast<double>(to_float(rois[r * 4 + 1])), scale), offset);
    const double x2 = __dsub_rn(__dmul_rn(static_cast<double>(to_float(rois[r * 4 + 2])), scale), offset);
    const double y2 = __dsub_rn(__dmul_rn(static_cast<double>(to_float(rois[r * 4 + 3])), scale), offset);
    double rw = __dsub_rn(x2, x1), rh = __dsub_rn(y2, y1);
    if (!s.half_pixel) {
      rw = larger(rw, 1.0);
      rh = larger(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(s.out_h), bin_w = rw / static_cast<double>(s.out_w);
    const int64_t grid_h = s.sampling_ratio > 0 ? s.sampling_ratio : static_cast<int64_t>(ceil(rh / static_cast<double>(s.out_h)));
    const int64_t grid_w = s.sampling_ratio > 0 ? s.sampling_ratio : static_cast<int64_t>(ceil(rw / static_cast<double>(s.out_w)));
    const double samples = static_cast<double>(grid_h * grid_w > 1 ? grid_h * grid_w : 1);
    const T* map = x + (b * s.channels + c) * s.height * s.width;
    double acc = 0.0, best = 0.0;
    bool first = true;
    for (int64_t iy = 0; iy < grid_h; ++iy)
      for (int64_t ix = 0; ix < grid_w; ++ix) {
        const double sy = __dadd_rn(__dadd_rn(y1, __dmul_rn(static_cast<double>(ph), bin_h)),
                                    __dmul_rn(static_cast<double>(iy) + 0.5, bin_h) / static_cast<double>(grid_h));
        const double sx = __dadd_rn(__dadd_rn(x1, __dmul_rn(static_cast<double>(pw), bin_w)),
                                    __dmul_rn(static_cast<double>(ix) + 0.5, bin_w) / static_cast<double>(grid_w));
        const double v = sample(map, s.height, s.width, sy, sx, s.max);
        if (s.max) {
          best = first ? v : larger(best, v);
          first = false;
        } else {
          acc = __dadd_rn(acc, v);
        }
      }
    y[e] = from_float<T>(static_cast<float>(s.max ? best : acc / samples));
  }
}

}  // namespace

void roi_align(DType t, const RoiAlignShape& s, const void* x, const void* rois, const int64_t* batch_indices, void* y,
               int sm_count, cudaStream_t stream) {
  const int64_t n = s.rois * s.channels * s.out_h * s.out_w;
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    roi_align_kernel<T><<<grid_stride_blocks(n, sm_count), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<const T*>(rois), batch_indices, static_cast<T*>(y));
  };
  if (t == DType::kFloat) launch(float{});
  else if (t == DType::kFloat16) launch(__half{});
  else throw InputError("RoiAlign on cuda takes float or float16, not " + std::string(dtype_name(t)));
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
