// Conv (1-D to 3-D; pads, strides, dilations, groups, auto_pad). fp32, bf16 and fp16 (widened to
// fp32) run on oneDNN's convolutions (backends/cpu/onednn_conv.h) wherever oneDNN implements the
// geometry on this CPU. Otherwise, and for double, im2col + one GEMM per image and group: Y[g] (M/g x OH*OW) = W[g] (M/g x C/g*KH*KW) @ col (C/g*KH*KW x OH*OW). A 1x1
// stride-1 unpadded conv skips im2col: the image already is the column matrix. 16-bit inputs are
// widened while the columns are gathered, accumulated in fp32 with the bias, and rounded once.
// ConvInteger and QLinearConv reuse the geometry and im2col in exact int32 arithmetic.
#include <memory>

#include "backends/cpu/blas.h"
#include "backends/cpu/integer_quant.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/onednn_conv.h"
#include "backends/cpu/onednn_runtime.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

// The window padded out to 3 spatial dims (a 1-D conv is a 3-D one of depth and height 1).
struct Geometry {
  int64_t n, c, m, groups;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  int64_t kernel_size() const { return k[0] * k[1] * k[2]; }
  int64_t col_rows() const { return c / groups * kernel_size(); }
  int64_t pixels() const { return out[0] * out[1] * out[2]; }
  int64_t image() const { return in[0] * in[1] * in[2]; }
  bool pointwise() const {
    for (int i = 0; i < 3; ++i)
      if (k[i] != 1 || s[i] != 1 || p[i] != 0) return false;
    return true;
  }
};

Geometry conv_geometry(const WindowAttrs& attrs, int64_t groups, const View& x, const View& w) {
  const Window win = conv_window(attrs, x.dims, w.dims);
  Geometry g{x.dims[0], x.dims[1], w.dims[0], groups, {}, {}, {}, {}, {}, {}};
  const size_t shift = 3 - win.in.size();
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= shift;
    g.in[i] = real ? win.in[i - shift] : 1;
    g.k[i] = real ? win.kernel[i - shift] : 1;
    g.out[i] = real ? win.out[i - shift] : 1;
    g.s[i] = real ? win.strides[i - shift] : 1;
    g.d[i] = real ? win.dilations[i - shift] : 1;
    g.p[i] = real ? win.pads_begin[i - shift] : 0;
  }
  return g;
}

// col[(c*K + kernel offset)][output position] = image[c][output position * S - P + offset * D],
// 0 outside the image. Each output row is split into its padded edges and the valid middle,
// which stride 1 copies as one run.
template <class T, class F>
void im2col(const T* image, int64_t channels, const Geometry& g, F* col, int threads) {
  const int64_t ks = g.kernel_size(), ow = g.out[2], sw = g.s[2];
  parallel_for(channels * ks, threads, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r / ks, i = r / (g.k[1] * g.k[2]) % g.k[0], j = r / g.k[2] % g.k[1], l = r % g.k[2];
      const T* plane = image + c * g.image();
      F* dst = col + r * g.pixels();
      // Output columns x whose input column x*SW - PW + l*DW lies in [0, W).
      const int64_t shift = l * g.d[2] - g.p[2];
      const int64_t x_lo = std::min(ow, shift >= 0 ? 0 : (-shift + sw - 1) / sw);
      const int64_t x_hi = std::max(x_lo, std::min(ow, g.in[2] - shift <= 0 ? 0 : (g.in[2] - shift + sw - 1) / sw));
      for (int64_t z = 0; z < g.out[0]; ++z) {
        const int64_t iz = z * g.s[0] - g.p[0] + i * g.d[0];
        for (int64_t y = 0; y < g.out[1]; ++y) {
          const int64_t iy = y * g.s[1] - g.p[1] + j * g.d[1];
          F* row = dst + (z * g.out[1] + y) * ow;
          if (iz < 0 || iz >= g.in[0] || iy < 0 || iy >= g.in[1]) {
            std::fill(row, row + ow, F(0));
            continue;
          }
          const T* src = plane + (iz * g.in[1] + iy) * g.in[2] + shift;
          std::fill(row, row + x_lo, F(0));
          if (sw == 1 && std::is_same_v<T, F>) {
            std::copy(src + x_lo, src + x_hi, reinterpret_cast<T*>(row) + x_lo);
          } else if constexpr (!std::is_same_v<T, F> && std::is_same_v<F, float>) {
            if (sw == 1)
              widen(src + x_lo, row + x_lo, x_hi - x_lo);
            else
              for (int64_t x = x_lo; x < x_hi; ++x) row[x] = load(src[x * sw]);
          } else {
            for (int64_t x = x_lo; x < x_hi; ++x) row[x] = static_cast<F>(load(src[x * sw]));
          }
          std::fill(row + x_hi, row + ow, F(0));
        }
      }
    }
  });
}

class Conv final : public Kernel {
 public:
  Conv(const Node& n, int64_t) : attrs_(n), groups_(n.attr_int("group", 1)) {}

  size_t infer(KernelIO& io) const override {
    const View &x = io.input(0), &w = io.input(1);
    if (x.rank() < 3 || x.rank() > 5) throw InputError("Conv supports 1-D to 3-D convolutions, X is " + dims_str(x.dims));
    infer_outputs(io);
    if (const DnnlConvForward* fast = onednn(x, w, io.has_in(2), io.threads))
      return fast->scratch_bytes() + (x.dtype == DType::kFloat16 ? Widened(io, fp16_chunk(x.dims[0])).bytes() : 0);
    const Geometry g = geometry(x, w);
    const Scratch sc = scratch_layout(g, x.dtype, w.numel(), io.threads);
    return sc.weights + sc.per_worker * static_cast<size_t>(sc.workers);
  }

  std::vector<LayoutWish> layout_preferences(const KernelIO& io) const override {
    const DnnlConvForward* fast = onednn(io.input(0), io.input(1), io.has_in(2), io.threads);
    if (!fast || !fast->weights_layout()) return {};
    return {{false, 1, fast->weights_layout()}};
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &w = io.input(1);
    if (const DnnlConvForward* fast = onednn(x, w, io.has_in(2), io.threads)) {
      run_onednn(*fast, io);
      return;
    }
    if (w.layout) throw Error("Conv: W arrives in a blocked layout but oneDNN does not run this convolution");
    const Geometry g = geometry(x, w);
    const Scratch sc = scratch_layout(g, x.dtype, w.numel(), ctx.threads);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
      constexpr bool kWide = std::is_same_v<T, F>;
      auto* scratch = static_cast<uint8_t*>(io.workspace);
      const F* weights;
      if constexpr (kWide) {
        weights = w.as<F>();
      } else {
        F* w32 = reinterpret_cast<F*>(scratch);
        widen(w.as<T>(), w32, w.numel(), ctx.threads);
        weights = w32;
      }
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const int64_t cg = g.c / g.groups, mg = g.m / g.groups, rows = g.col_rows(), px = g.pixels();
      // Images are independent: each worker takes a share with its own column (and fp32 output)
      // buffer; one image alone uses every core inside im2col and the product instead.
      const int inner = sc.workers == 1 ? ctx.threads : 1;
#pragma omp parallel for num_threads(sc.workers) schedule(static, 1) if (sc.workers > 1)
      for (int worker = 0; worker < sc.workers; ++worker) {
        uint8_t* mine = scratch + sc.weights + sc.per_worker * static_cast<size_t>(worker);
        F* col = reinterpret_cast<F*>(mine);
        F* y32 = reinterpret_cast<F*>(mine + sc.columns);
        for (int64_t n = g.n * worker / sc.workers; n < g.n * (worker + 1) / sc.workers; ++n) {
          F* yimg = kWide ? reinterpret_cast<F*>(out + n * g.m * px) : y32;
          for (int64_t grp = 0; grp < g.groups; ++grp) {
            const T* image = in + (n * g.c + grp * cg) * g.image();
            const F* cols = col;
            if constexpr (kWide)
              if (g.pointwise()) cols = image;
            if (cols == col) im2col(image, cg, g, col, inner);
            parallel_gemm<F>(false, false, mg, px, rows, F(1), weights + grp * mg * rows, rows, cols, px, F(0),
                             yimg + grp * mg * px, px, inner);
          }
          finish<T, F>(io, yimg, out + n * g.m * px, g, inner);
        }
      }
    });
  }

 private:
  // Scratch: fp32 weights (16-bit types), then per worker a column matrix and an fp32 output image
  // (16-bit types), each 64-byte aligned.
  struct Scratch {
    int workers;
    size_t weights, columns, per_worker;
  };
  static Scratch scratch_layout(const Geometry& g, DType t, int64_t weight_count, int threads) {
    const bool low = is_low_precision(t);
    const size_t elem = t == DType::kDouble ? 8 : 4;
    auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
    Scratch s;
    s.workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, g.n)));
    s.weights = low ? fp32_scratch(weight_count) : 0;
    s.columns = g.pointwise() && !low ? 0 : aligned(static_cast<size_t>(g.col_rows() * g.pixels()) * elem);
    s.per_worker = s.columns + (low ? fp32_scratch(g.m * g.pixels()) : 0);
    return s;
  }

  Window window(const View& x, const View& w) const { return conv_window(attrs_, x.dims, w.dims); }

  Geometry geometry(const View& x, const View& w) const { return conv_geometry(attrs_, groups_, x, w); }

  // Adds the bias to one image's output and stores it: in place for fp32/fp64, rounded from the
  // fp32 accumulator for 16-bit types.
  template <class T, class F>
  void finish(const KernelIO& io, F* acc, T* out, const Geometry& g, int threads) const {
    const T* bias = io.has_in(2) ? io.input(2).as<T>() : nullptr;
    const int64_t px = g.pixels();
    parallel_for(g.m, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(px, 1)),
                 [&](int64_t m0, int64_t m1) {
                   for (int64_t m = m0; m < m1; ++m) {
                     const F b = bias ? static_cast<F>(load(bias[m])) : F(0);
                     F* a = acc + m * px;
                     if (bias)
#pragma omp simd
                       for (int64_t i = 0; i < px; ++i) a[i] += b;
                     if constexpr (!std::is_same_v<T, F>) narrow(a, out + m * px, px);
                   }
                 });
  }

  // fp16 through oneDNN's fp32 convolution, half the batch at a time (fp16_chunk): X, W, B widened
  // into the workspace after oneDNN's own scratch, Y accumulated there in fp32 and rounded once.
  // Staging a whole batch in fp32 would make the fp16 step's workspace larger than the fp32 step's.
  struct Widened {
    size_t x, w, b, y;
    Widened(const KernelIO& io, int64_t images)
        : x(fp32_scratch(io.input(0).numel() / std::max<int64_t>(1, io.input(0).dims[0]) * images)),
          w(fp32_scratch(io.input(1).numel())),
          b(io.has_in(2) ? fp32_scratch(io.input(2).numel()) : 0),
          y(fp32_scratch(io.output(0).numel() / std::max<int64_t>(1, io.output(0).dims[0]) * images)) {}
    size_t bytes() const { return x + w + b + y; }
  };

  void run_onednn(const DnnlConvForward& fast, KernelIO& io) const {
    const View &x = io.input(0), &w = io.input(1);
    View& y = io.output(0);
    const void* bias = io.has_in(2) ? io.input(2).data : nullptr;
    auto* scratch = static_cast<uint8_t*>(io.workspace);
    if (x.dtype != DType::kFloat16) {
      fast.run(x.data, w.data, bias, y.data, scratch);
      return;
    }
    const int64_t images = fp16_chunk(x.dims[0]);
    const Widened sizes(io, images);
    auto* x32 = reinterpret_cast<float*>(scratch + fast.scratch_bytes());
    auto* w32 = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(x32) + sizes.x);
    auto* b32 = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(w32) + sizes.w);
    auto* y32 = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(b32) + sizes.b);
    widen(w.as<f16>(), w32, w.numel(), io.threads);
    if (bias) widen(io.input(2).as<f16>(), b32, io.input(2).numel(), io.threads);
    const int64_t x_image = x.numel() / x.dims[0], y_image = y.numel() / x.dims[0];
    for (int64_t n = 0; n < x.dims[0]; n += images) {
      widen(x.as<f16>() + n * x_image, x32, images * x_image, io.threads);
      fast.run(x32, w32, bias ? b32 : nullptr, y32, scratch);
      narrow(y32, y.as<f16>() + n * y_image, images * y_image, io.threads);
    }
  }

  // The oneDNN convolution for these inputs, made on first use per input signature; null for
  // double and where oneDNN has no implementation.
  const DnnlConvForward* onednn(const View& x, const View& w, bool bias, int threads) const {
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16) return nullptr;
    if (w.dtype != x.dtype || w.rank() != x.rank()) return nullptr;
    const int tag = (static_cast<int>(x.dtype) * 2 + bias) | w.layout << 8;
    return prepared_.find_or_make(x.dims, w.dims, tag, threads, [&]() -> std::unique_ptr<DnnlConvForward> {
      if (groups_ <= 0 || x.dims[1] != w.dims[1] * groups_) return nullptr;  // the im2col path reports it
      const ConvShape s = conv_shape(x.dims, w.dims[0], groups_, window(x, w), x.dtype == DType::kFloat16);
      return std::make_unique<DnnlConvForward>(s, x.dtype == DType::kBFloat16 ? DnnlType::kBF16 : DnnlType::kF32,
                                               bias, threads, w.layout);
    });
  }

  WindowAttrs attrs_;
  int64_t groups_;
  onednn::PrimitiveCache<DnnlConvForward> prepared_;
};

// ConvInteger(x, w, x_zero_point, w_zero_point) -> int32 and QLinearConv(x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, B) -> y_zero_point's type, in exact int32 arithmetic:
// X and W widened minus their zero points (W's per tensor or per output channel), so padding adds 0
// as ONNX's reference pads the shifted image; then Conv's im2col and an int32 product per image and
// group. QLinearConv adds the int32 bias and requantizes with x_scale w_scale[m] / y_scale.
template <bool kQLinear>
class IntegerConv final : public Kernel {
 public:
  IntegerConv(const Node& n, int64_t) : attrs_(n), groups_(n.attr_int("group", 1)) {}

  size_t infer(KernelIO& io) const override {
    const View &x = io.input(0), &w = io.input(kW);
    if (x.rank() < 3 || x.rank() > 5) throw InputError("supports 1-D to 3-D convolutions, X is " + dims_str(x.dims));
    infer_outputs(io);
    const Geometry g = conv_geometry(attrs_, groups_, x, w);
    return fp32_scratch(x.numel()) + fp32_scratch(w.numel()) + fp32_scratch(g.col_rows() * g.pixels()) +
           fp32_scratch(g.m * g.pixels());
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &w = io.input(kW);
    const Geometry g = conv_geometry(attrs_, groups_, x, w);
    const int64_t cg = g.c / g.groups, mg = g.m / g.groups, rows = g.col_rows(), px = g.pixels();
    auto* x32 = static_cast<int32_t*>(io.workspace);
    auto* w32 = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(x32) + fp32_scratch(x.numel()));
    auto* col = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(w32) + fp32_scratch(w.numel()));
    auto* acc = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(col) + fp32_scratch(rows * px));
    const View* x_zp = io.has_in(kXZeroPoint) ? &io.input(kXZeroPoint) : nullptr;
    const View* w_zp = io.has_in(kWZeroPoint) ? &io.input(kWZeroPoint) : nullptr;
    if (x_zp && x_zp->numel() != 1) throw InputError("x_zero_point must have one element, it has " + std::to_string(x_zp->numel()));
    widen_minus_zero_point(x, x_zp, 1, 1, x32, "X");
    widen_minus_zero_point(w, w_zp, w.numel() / g.m, g.m, w32, "W");
    const int32_t* bias = nullptr;
    if constexpr (kQLinear) {
      if (io.has_in(8)) {
        const View& b = io.input(8);
        if (b.dtype != DType::kInt32 || b.numel() != g.m) throw InputError("B must be int32 with one element per output channel");
        bias = b.as<int32_t>();
      }
    }
    View& y = io.output(0);
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        im2col(x32 + (n * g.c + grp * cg) * g.image(), cg, g, col, ctx.threads);
        const int32_t* wg = w32 + grp * mg * rows;
        parallel_for(mg, ctx.threads, 1, [&](int64_t m0, int64_t m1) {
          for (int64_t m = m0; m < m1; ++m) {
            int32_t* o = acc + (grp * mg + m) * px;
            std::fill(o, o + px, 0);
            for (int64_t r = 0; r < rows; ++r) {
              const int32_t wv = wg[m * rows + r];
              const int32_t* c = col + r * px;
              for (int64_t i = 0; i < px; ++i) o[i] = wrapping_add(o[i], wv * c[i]);
            }
          }
        });
      }
      if constexpr (!kQLinear) {
        std::copy(acc, acc + g.m * px, y.as<int32_t>() + n * g.m * px);
      } else {
        const Scales x_scale(io.input(1), 1, "x_scale"), w_scale(io.input(4), g.m, "w_scale"), y_scale(io.input(6), 1, "y_scale");
        const int32_t y_zp = scalar_zero_point(&io.input(7), "y_zero_point");
        for (int64_t m = 0; m < g.m; ++m) {
          const float multiplier = x_scale.at(0) * w_scale.at(m) / y_scale.at(0);
          for (int64_t i = 0; i < px; ++i)
            requantize(wrapping_add(acc[m * px + i], bias ? bias[m] : 0), multiplier, y_zp, y.dtype, y.data, (n * g.m + m) * px + i);
        }
      }
    }
  }

 private:
  static constexpr size_t kW = kQLinear ? 3 : 1;
  static constexpr size_t kXZeroPoint = 2;  // in both ops
  static constexpr size_t kWZeroPoint = kQLinear ? 5 : 3;
  WindowAttrs attrs_;
  int64_t groups_;
};

}  // namespace

const std::vector<OpEntry>& conv_ops() {
  static const std::vector<OpEntry> ops = {
      {"Conv", make_kernel<Conv>, FloatTypes::mask(), {}},
      {"ConvInteger", make_kernel<IntegerConv<false>>, TypeList<uint8_t, int8_t>::mask(), {}},
      {"QLinearConv", make_kernel<IntegerConv<true>>, TypeList<uint8_t, int8_t>::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
