// Conv (1-D and 2-D; pads, strides, dilations, groups, auto_pad) as im2col + one GEMM per image
// and group: Y[g] (M/g x OH*OW) = W[g] (M/g x C/g*KH*KW) @ col (C/g*KH*KW x OH*OW). A 1x1
// stride-1 unpadded conv skips im2col: the image already is the column matrix. 16-bit inputs are
// widened while the columns are gathered, accumulated in fp32 with the bias, and rounded once.
#include "backends/cpu/blas.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

// 2-D view of the window (a 1-D conv is a 2-D one with height 1).
struct Geometry {
  int64_t n, c, h, w, m, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw, groups;
  int64_t col_rows() const { return c / groups * kh * kw; }
  int64_t pixels() const { return oh * ow; }
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

// col[(c*KH + i)*KW + j][y*OW + x] = image[c][y*SH - PH + i*DH][x*SW - PW + j*DW], 0 outside.
template <class T, class F>
void im2col(const T* image, int64_t channels, const Geometry& g, F* col, int threads) {
  parallel_for(channels * g.kh * g.kw, threads, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
      const T* plane = image + c * g.h * g.w;
      F* dst = col + r * g.pixels();
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t iy = y * g.sh - g.ph + i * g.dh;
        F* row = dst + y * g.ow;
        if (iy < 0 || iy >= g.h) {
          std::fill(row, row + g.ow, F(0));
          continue;
        }
        const T* src = plane + iy * g.w;
        for (int64_t x = 0; x < g.ow; ++x) {
          const int64_t ix = x * g.sw - g.pw + j * g.dw;
          row[x] = ix >= 0 && ix < g.w ? static_cast<F>(load(src[ix])) : F(0);
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
    if (x.dtype != w.dtype || (io.has_in(2) && io.input(2).dtype != x.dtype))
      throw InputError("Conv inputs have different element types");
    if (x.rank() < 3 || x.rank() > 4) throw InputError("Conv supports 1-D and 2-D convolutions, X is " + dims_str(x.dims));
    if (w.rank() != x.rank()) throw InputError("Conv W " + dims_str(w.dims) + " does not match X " + dims_str(x.dims));
    if (groups_ <= 0 || x.dims[1] % groups_ != 0 || w.dims[0] % groups_ != 0 || w.dims[1] * groups_ != x.dims[1])
      throw InputError("Conv channels do not match: X " + dims_str(x.dims) + ", W " + dims_str(w.dims) + ", group " +
                       std::to_string(groups_));
    if (io.has_in(2) && io.input(2).numel() != w.dims[0]) throw InputError("Conv bias must have M elements");
    const Geometry g = geometry(x, w);
    View& y = io.output(0);
    y.dtype = x.dtype;
    y.dims = {g.n, g.m};
    const Window win = window(x, w);
    y.dims.insert(y.dims.end(), win.out.begin(), win.out.end());
    const size_t elem = x.dtype == DType::kDouble ? 8 : 4;
    size_t scratch = g.pointwise() && !is_low_precision(x.dtype) ? 0 : g.col_rows() * g.pixels() * elem;
    scratch = (scratch + 63) / 64 * 64;
    if (is_low_precision(x.dtype)) scratch += fp32_scratch(w.numel()) + fp32_scratch(g.m * g.pixels());
    return scratch;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &w = io.input(1);
    const Geometry g = geometry(x, w);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
      constexpr bool kWide = std::is_same_v<T, F>;
      uint8_t* scratch = static_cast<uint8_t*>(io.workspace);
      F* col = reinterpret_cast<F*>(scratch);
      size_t used = g.pointwise() && kWide ? 0 : (g.col_rows() * g.pixels() * sizeof(F) + 63) / 64 * 64;
      const F* weights;
      F* y32 = nullptr;
      if constexpr (kWide) {
        weights = w.as<F>();
      } else {
        F* w32 = reinterpret_cast<F*>(scratch + used);
        widen(w.as<T>(), w32, w.numel(), ctx.threads);
        weights = w32;
        y32 = reinterpret_cast<F*>(scratch + used + fp32_scratch(w.numel()));
      }
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const int64_t cg = g.c / g.groups, mg = g.m / g.groups, rows = g.col_rows(), px = g.pixels();
      for (int64_t n = 0; n < g.n; ++n) {
        F* yimg = kWide ? reinterpret_cast<F*>(out + n * g.m * px) : y32;
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const T* image = in + (n * g.c + grp * cg) * g.h * g.w;
          const F* cols;
          if constexpr (kWide) {
            if (g.pointwise()) {
              cols = image;
            } else {
              im2col(image, cg, g, col, ctx.threads);
              cols = col;
            }
          } else {
            im2col(image, cg, g, col, ctx.threads);
            cols = col;
          }
          gemm<F>(false, false, mg, px, rows, F(1), weights + grp * mg * rows, rows, cols, px, F(0),
                  yimg + grp * mg * px, px);
        }
        finish<T, F>(io, yimg, out + n * g.m * px, g, ctx.threads);
      }
    });
  }

 private:
  Window window(const View& x, const View& w) const {
    std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(w.dims.begin() + 2, w.dims.end());
    if (!attrs_.kernel.empty() && attrs_.kernel != k)
      throw InputError("kernel_shape " + dims_str(attrs_.kernel) + " does not match W " + dims_str(w.dims));
    return make_window(attrs_, in, k);
  }

  Geometry geometry(const View& x, const View& w) const {
    const Window win = window(x, w);
    const bool one_d = x.rank() == 3;
    auto at = [&](const std::vector<int64_t>& v, int64_t one) { return one_d ? one : v[0]; };
    auto last = [&](const std::vector<int64_t>& v) { return v.back(); };
    return Geometry{x.dims[0],
                    x.dims[1],
                    one_d ? 1 : x.dims[2],
                    x.dims.back(),
                    w.dims[0],
                    at(win.kernel, 1),
                    last(win.kernel),
                    at(win.out, 1),
                    last(win.out),
                    at(win.strides, 1),
                    last(win.strides),
                    at(win.dilations, 1),
                    last(win.dilations),
                    at(win.pads_begin, 0),
                    last(win.pads_begin),
                    groups_};
  }

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
                     if constexpr (std::is_same_v<T, F>) {
                       if (bias)
                         for (int64_t i = 0; i < px; ++i) a[i] += b;
                     } else {
                       for (int64_t i = 0; i < px; ++i) out[m * px + i] = store<T>(a[i] + b);
                     }
                   }
                 });
  }

  WindowAttrs attrs_;
  int64_t groups_;
};

}  // namespace

const std::vector<OpEntry>& conv_ops() {
  static const std::vector<OpEntry> ops = {
      {"Conv", make_kernel<Conv>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
