// QuantizeLinear and DequantizeLinear on the device (quantize.cuh): a thread per element in a
// grid-stride loop.
#include "backends/cuda/quantize.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class Z>
struct Range;
template <>
struct Range<uint8_t> {
  static constexpr float lo = 0.0f, hi = 255.0f;
};
template <>
struct Range<int8_t> {
  static constexpr float lo = -128.0f, hi = 127.0f;
};

template <class T, class S, class Z>
__global__ void __launch_bounds__(256)
    quantize_kernel(QuantShape q, const T* __restrict__ x, const S* __restrict__ scale, const Z* __restrict__ zp,
                    Z* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < q.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = q.extent == 1 ? 0 : i / q.inner % q.extent;
    // rintf: round half to even in the default rounding mode, as ONNX says.
    float v = rintf(__fdiv_rn(to_float(x[i]), to_float(scale[k])));
    v = zp ? __fadd_rn(v, static_cast<float>(zp[k])) : v;
    if (v != v) v = 0.0f;
    y[i] = static_cast<Z>(fminf(fmaxf(v, Range<Z>::lo), Range<Z>::hi));
  }
}

template <class X, class S>
__global__ void __launch_bounds__(256)
    dequantize_kernel(QuantShape q, const X* __restrict__ x, const S* __restrict__ scale, const X* __restrict__ zp,
                      S* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < q.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = q.extent == 1 ? 0 : i / q.inner % q.extent;
    const int64_t d = static_cast<int64_t>(x[i]) - (zp ? static_cast<int64_t>(zp[k]) : 0);
    y[i] = from_float<S>(__fmul_rn(static_cast<float>(d), to_float(scale[k])));
  }
}

// Calls f(Z{}) for uint8 or int8, f(int32_t{}) too where `with_int32`.
template <class F>
void dispatch_quantized(DType t, bool with_int32, const char* what, F&& f) {
  switch (t) {
    case DType::kUInt8: f(uint8_t{}); break;
    case DType::kInt8: f(int8_t{}); break;
    case DType::kInt32:
      if (with_int32) {
        f(int32_t{});
        break;
      }
      [[fallthrough]];
    default:
      throw InputError(std::string(what) + " does not take " + std::string(dtype_name(t)) + " quantized values");
  }
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

QuantShape quant_shape(const std::vector<int64_t>& x, const std::vector<int64_t>& scale, int64_t axis) {
  QuantShape q;
  q.numel = 1;
  for (int64_t d : x) q.numel *= d;
  int64_t scales = 1;
  for (int64_t d : scale) scales *= d;
  if (scales == 1) return q;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank)
    throw InputError("axis " + std::to_string(axis) + " is out of range for an input of rank " + std::to_string(rank));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  if (scale.size() != 1 || scale[0] != x[a])
    throw InputError("the scale has shape " + dims_text(scale) + ", neither one element nor the " +
                     std::to_string(x[a]) + " of the input's axis " + std::to_string(a));
  q.extent = x[a];
  for (size_t d = a + 1; d < x.size(); ++d) q.inner *= x[d];
  return q;
}

void quantize_linear(DType x_type, DType scale_type, DType y_type, const QuantShape& s, const void* x,
                     const void* scale, const void* zero_point, void* y, int sm_count, cudaStream_t stream) {
  if (s.numel == 0) return;
  dispatch_float(x_type, "QuantizeLinear", [&](auto xt) {
    using T = decltype(xt);
    dispatch_float(scale_type, "QuantizeLinear's scale", [&](auto st) {
      using S = decltype(st);
      dispatch_quantized(y_type, false, "QuantizeLinear", [&](auto zt) {
        using Z = decltype(zt);
        if constexpr (!std::is_same_v<Z, int32_t>) {
          quantize_kernel<T, S, Z><<<grid_stride_blocks(s.numel, sm_count), 256, 0, stream>>>(
              s, static_cast<const T*>(x), static_cast<const S*>(scale), static_cast<const Z*>(zero_point),
              static_cast<Z*>(y));
        }
      });
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void dequantize_linear(DType x_type, DType scale_type, const QuantShape& s, const void* x, const void* scale,
                       const void* zero_point, void* y, int sm_count, cudaStream_t stream) {
  if (s.numel == 0) return;
  dispatch_quantized(x_type, true, "DequantizeLinear", [&](auto xt) {
    using X = decltype(xt);
    dispatch_float(scale_type, "DequantizeLinear's scale", [&](auto st) {
      using S = decltype(st);
      dequantize_kernel<X, S><<<grid_stride_blocks(s.numel, sm_count), 256, 0, stream>>>(
          s, static_cast<const X*>(x), static_cast<const S*>(scale), static_cast<const X*>(zero_point),
          static_cast<S*>(y));
    });
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
