// QuantizeLinear, DequantizeLinear (opset 10-17) and DynamicQuantizeLinear: the edges of the quantized regions that ONNX
// Runtime's quantization tools write (QDQ models: each weight and activation passes through a
// Quantize -> Dequantize pair, the float ops between them). Per-tensor or per-axis (opset 13's
// `axis`, default 1) scale and zero point.
//   QuantizeLinear:   y = saturate(round_half_to_even(x / scale) + zero_point), uint8 without a zero
//                     point, else the zero point's type (uint8 or int8; int32 is no output type)
//   DequantizeLinear: y = (x - zero_point) * scale, in the scale's type (fp32 at opset <= 17)
// The division and product are fp32 (double for fp64 scales) as ONNX Runtime's kernels compute them.
#include <cmath>
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// Which scale and zero point element i of x uses: a per-tensor pair (one element) or the one of
// its index along `axis`.
struct QuantAxis {
  int64_t inner = 1, extent = 1;  // x as [outer, extent, inner]; extent 1: per tensor

  QuantAxis(const View& x, const View& scale, int64_t axis) {
    if (scale.numel() == 1) return;
    const int64_t rank = static_cast<int64_t>(x.rank());
    const size_t a = static_cast<size_t>(normalize_axis(axis, rank));
    if (scale.rank() != 1 || scale.dims[0] != x.dims[a])
      throw InputError("the scale has shape " + dims_str(scale.dims) + ", neither one element nor the " +
                       std::to_string(x.dims[a]) + " of the input's axis " + std::to_string(a));
    inner = product(x.dims, a + 1);
    extent = x.dims[a];
  }
  int64_t index(int64_t i) const { return extent == 1 ? 0 : i / inner % extent; }
};

template <class Z>
constexpr float lowest() {
  return static_cast<float>(std::numeric_limits<Z>::lowest());
}
template <class Z>
constexpr float highest() {
  return static_cast<float>(std::numeric_limits<Z>::max());
}

class QuantizeLinear final : public Kernel {
 public:
  QuantizeLinear(const Node& n, int64_t) : axis_(n.attr_int("axis", 1)) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const View& scale = io.input(1);
    const QuantAxis q(x, scale, axis_);
    const View* zp = io.has_in(2) ? &io.input(2) : nullptr;
    View& y = io.output(0);
    dispatch(FloatTypes{}, x.dtype, [&](auto xt) {
      using T = typename decltype(xt)::type;
      dispatch(FloatTypes{}, scale.dtype, [&](auto st) {
        using S = typename decltype(st)::type;
        dispatch(TypeList<uint8_t, int8_t>{}, y.dtype, [&](auto zt) {
          using Z = typename decltype(zt)::type;
          using C = std::conditional_t<std::is_same_v<S, double> || std::is_same_v<T, double>, double, float>;
          const T* in = x.as<T>();
          const S* s = scale.as<S>();
          const Z* z = zp ? zp->as<Z>() : nullptr;
          Z* out = y.as<Z>();
          parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
              const int64_t k = q.index(i);
              // nearbyint: round half to even in the default rounding mode, as ONNX says.
              C v = std::nearbyint(static_cast<C>(load(in[i])) / static_cast<C>(load(s[k])));
              v += z ? static_cast<C>(z[k]) : C(0);
              if (v != v) v = 0;  // NaN: ONNX Runtime's saturating cast gives 0
              out[i] = static_cast<Z>(std::min<C>(std::max<C>(v, lowest<Z>()), highest<Z>()));
            }
          });
        });
      });
    });
  }

 private:
  int64_t axis_;
};

class DequantizeLinear final : public Kernel {
 public:
  DequantizeLinear(const Node& n, int64_t) : axis_(n.attr_int("axis", 1)) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const View& scale = io.input(1);
    const QuantAxis q(x, scale, axis_);
    const View* zp = io.has_in(2) ? &io.input(2) : nullptr;
    if (zp && zp->dtype != x.dtype)
      throw InputError("the zero point is " + std::string(dtype_name(zp->dtype)) + " but the input is " +
                       std::string(dtype_name(x.dtype)));
    View& y = io.output(0);
    dispatch(TypeList<uint8_t, int8_t, int32_t>{}, x.dtype, [&](auto xt) {
      using X = typename decltype(xt)::type;
      dispatch(FloatTypes{}, scale.dtype, [&](auto st) {
        using S = typename decltype(st)::type;
        using C = compute_t<S>;
        const X* in = x.as<X>();
        const S* s = scale.as<S>();
        const X* z = zp ? zp->as<X>() : nullptr;
        S* out = y.as<S>();
        parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const int64_t k = q.index(i);
            // The difference of two int32 can overflow int32: it is taken in int64.
            const int64_t d = static_cast<int64_t>(in[i]) - (z ? static_cast<int64_t>(z[k]) : 0);
            out[i] = store<S>(static_cast<C>(d) * load(s[k]));
          }
        });
      });
    });
  }

 private:
  int64_t axis_;
};

// DynamicQuantizeLinear (opset 11): x (fp32) to uint8 with a scale and zero point from x's range,
// by ONNX's formula in fp32: the range [min(0, min x), max(0, max x)], y_scale = range / 255,
// y_zero_point = saturate(round(0 - min / y_scale)), y = saturate(round(x / y_scale) + y_zero_point),
// every round half to even. An all-zero x (range 0) takes the range 1, as ONNX's reference does.
class DynamicQuantizeLinear final : public Kernel {
 public:
  DynamicQuantizeLinear(const Node&, int64_t) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    if (x.dtype != DType::kFloat) throw InputError("DynamicQuantizeLinear takes float32, not " + std::string(dtype_name(x.dtype)));
    const float* in = x.as<float>();
    const int64_t n = x.numel();
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, in[i]);
      hi = std::max(hi, in[i]);
    }
    const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
    const float zero = std::nearbyint(std::min(255.0f, std::max(0.0f, 0.0f - lo / scale)));
    uint8_t* out = io.output(0).as<uint8_t>();
    parallel_for(n, ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float v = std::nearbyint(in[i] / scale) + zero;
        if (v != v) v = 0;
        out[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, v)));
      }
    });
    if (io.has_out(1)) io.output(1).as<float>()[0] = scale;
    if (io.has_out(2)) io.output(2).as<uint8_t>()[0] = static_cast<uint8_t>(zero);
  }
};

}  // namespace

const std::vector<OpEntry>& quantize_ops() {
  static const std::vector<OpEntry> ops = {
      {"QuantizeLinear", make_kernel<QuantizeLinear>, FloatTypes::mask(), {}},
      {"DequantizeLinear", make_kernel<DequantizeLinear>, TypeList<uint8_t, int8_t, int32_t>::mask(), {}},
      {"DynamicQuantizeLinear", make_kernel<DynamicQuantizeLinear>, TypeList<float>::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
