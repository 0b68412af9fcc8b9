// DeformConv on the device (deform_conv.cuh): a grid-stride loop over the output elements.
#include "backends/cuda/deform_conv.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

// The bilinear sample of map at (y, x): each corner outside the image counts zero.
template <class T>
__device__ __forceinline__ float sample(const T* map, int64_t height, int64_t width, float y, float x) {
  if (!(y > -2.0f && y < static_cast<float>(height) && x > -2.0f && x < static_cast<float>(width))) return 0.0f;
  const float fy = floorf(y), fx = floorf(x);
  const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const float ly = y - fy, lx = x - fx;
  float v = 0.0f;
  for (int k = 0; k < 4; ++k) {
    const int64_t cy = y0 + k / 2, cx = x0 + k % 2;
    if (cy < 0 || cy >= height || cx < 0 || cx >= width) continue;
    const float wy = k < 2 ? 1.0f - ly : ly, wx = k % 2 == 0 ? 1.0f - lx : lx;
    v += wy * wx * to_float(map[cy * width + cx]);
  }
  return v;
}

template <class T>
__global__ void __launch_bounds__(kThreads) deform_conv_kernel(DeformConvShape s, const T* __restrict__ x,
                                                               const T* __restrict__ w, const T* __restrict__ offset,
                                                               const T* __restrict__ bias, const T* __restrict__ mask,
                                                               T* __restrict__ y) {
  const int64_t pixels = s.out_h * s.out_w, n_out = s.batch * s.outputs * pixels, taps = s.kernel_h * s.kernel_w;
  const int64_t cg = s.channels / s.groups, mg = s.outputs / s.groups, per_offset_group = s.channels / s.offset_groups;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n_out;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = e % pixels, m = e / pixels % s.outputs, n = e / (pixels * s.outputs);
    const int64_t oy = p / s.out_w, ox = p % s.out_w, grp = m / mg;
    float acc = bias ? to_float(bias[m]) : 0.0f;
    for (int64_t ci = 0; ci < cg; ++ci) {
      const int64_t c = grp * cg + ci, og = c / per_offset_group;
      const T* map = x + (n * s.channels + c) * s.height * s.width;
      const T* weights = w + (m * cg + ci) * taps;
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t i = k / s.kernel_w, j = k % s.kernel_w;
        const int64_t row = ((n * s.offset_groups + og) * 2 * taps + 2 * k) * pixels + p;
        const float sy = static_cast<float>(oy * s.stride_h - s.pad_h + i * s.dilation_h) + to_float(offset[row]);
        const float sx = static_cast<float>(ox * s.stride_w - s.pad_w + j * s.dilation_w) + to_float(offset[row + pixels]);
        float v = sample(map, s.height, s.width, sy, sx);
        if (mask) v *= to_float(mask[((n * s.offset_groups + og) * taps + k) * pixels + p]);
        acc += to_float(weights[k]) * v;
      }
    }
    y[e] = from_float<T>(acc);
  }
}

}  // namespace

void deform_conv(DType t, const DeformConvShape& s, const void* x, const void* w, const void* offset, const void* bias,
                 const void* mask, void* y, int sm_count, cudaStream_t stream) {
  const int64_t n = s.batch * s.outputs * s.out_h * s.out_w;
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    deform_conv_kernel<T><<<grid_stride_blocks(n, sm_count), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(offset), static_cast<const T*>(bias),
        static_cast<const T*>(mask), static_cast<T*>(y));
  };
  if (t == DType::kFloat) launch(float{});
  else if (t == DType::kFloat16) launch(__half{});
  else if (t == DType::kBFloat16) launch(__nv_bfloat16{});
  else throw InputError("DeformConv on cuda takes float, float16 or bfloat16, not " + std::string(dtype_name(t)));
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
