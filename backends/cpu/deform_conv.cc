// ai.onnx_amp DeformConv (ONNX opset 19, 2-D, as torchvision's deform_conv2d): tap k = (i, j) of
// output pixel (oy, ox) reads input channel c at y = oy·stride - pad + i·dilation + dy and x = ... +
// dx, with (dy, dx) = offset[n, og·2K + 2k, oy, ox] and [.. + 2k + 1 ..] for c's offset group og,
// bilinearly, each of the four corners outside the image counting zero (none when y <= -1, y >=
// H, x <= -1 or x >= W), times mask[n, og·K + k, oy, ox] (1 without a mask). Those samples form
// the column matrix of a grouped convolution: one GEMM per image and group, as Conv's im2col path
// (conv.cc). 16-bit types are computed in fp32 and rounded once; double in double.
//
// ai.onnx_amp DeformConvGrad(dY, X, W, offset[, mask]) -> dX, dW, doffset, dB, dmask: dW from the
// same columns (dY · colsᵀ), the columns' gradient Wᵀ · dY spread back to X's corners with the
// bilinear weights, to the offsets through the weights' derivatives and to the mask as the
// unmasked sample; as torchvision's backward. The scattered sums run in double, rounded once.
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/window.h"

namespace amp::cpu {
namespace {

struct DeformGeometry {
  int64_t n, c, h, w, m, kh, kw, oh, ow, groups, offset_groups;
  int64_t stride[2], pad[2], dilation[2];
  int64_t taps() const { return kh * kw; }
  int64_t pixels() const { return oh * ow; }
  int64_t channels_per_group() const { return c / groups; }
  int64_t outputs_per_group() const { return m / groups; }
  int64_t rows() const { return channels_per_group() * taps(); }  // of one group's column matrix
  int64_t offset_group_of(int64_t channel) const { return channel / (c / offset_groups); }
};

class DeformAttrs {
 public:
  explicit DeformAttrs(const Node& n)
      : window_(n), groups_(n.attr_int("group", 1)), offset_groups_(n.attr_int("offset_group", 1)) {
    if (groups_ <= 0 || offset_groups_ <= 0) throw InputError("DeformConv's group and offset_group must be positive");
  }

  // The geometry of X, W, offset and mask (when given), checked against each other.
  DeformGeometry geometry(const View& x, const View& w, const View& offset, const View* mask) const {
    if (x.rank() != 4 || w.rank() != 4)
      throw InputError("DeformConv runs on 2-D images: X " + dims_str(x.dims) + " and W " + dims_str(w.dims) + " must be 4-D");
    DeformGeometry g{};
    g.n = x.dims[0], g.c = x.dims[1], g.h = x.dims[2], g.w = x.dims[3], g.m = w.dims[0], g.kh = w.dims[2], g.kw = w.dims[3];
    g.groups = groups_, g.offset_groups = offset_groups_;
    if (g.c % g.groups != 0 || g.m % g.groups != 0 || w.dims[1] * g.groups != g.c || g.c % g.offset_groups != 0)
      throw InputError("DeformConv channels do not match: X " + dims_str(x.dims) + ", W " + dims_str(w.dims) + ", group " +
                       std::to_string(g.groups) + ", offset_group " + std::to_string(g.offset_groups));
    const Window win = make_window(window_, {g.h, g.w}, {g.kh, g.kw});
    g.oh = win.out[0], g.ow = win.out[1];
    for (int d = 0; d < 2; ++d) g.stride[d] = win.strides[d], g.pad[d] = win.pads_begin[d], g.dilation[d] = win.dilations[d];
    auto check = [&](const View& v, const char* name, int64_t per_tap) {
      const std::vector<int64_t> want = {g.n, g.offset_groups * per_tap * g.taps(), g.oh, g.ow};
      if (v.dims != want) throw InputError(std::string("DeformConv's ") + name + " must be " + dims_str(want) + ", not " + dims_str(v.dims));
    };
    check(offset, "offset", 2);
    if (mask) check(*mask, "mask", 1);
    return g;
  }

 private:
  WindowAttrs window_;
  int64_t groups_, offset_groups_;
};

// One sampling place: the flat positions of its four corners (-1 outside the image) and its
// fractional parts. Corners: (y0, x0), (y0, x1), (y1, x0), (y1, x1).
template <class F>
struct Tap {
  int64_t at[4] = {-1, -1, -1, -1};
  F ly = 0, lx = 0;

  F weight(int k) const {
    const F wy = k < 2 ? 1 - ly : ly, wx = k % 2 == 0 ? 1 - lx : lx;
    return wy * wx;
  }
  template <class T>
  F value(const T* map) const {
    F v = 0;
    for (int k = 0; k < 4; ++k)
      if (at[k] >= 0) v += weight(k) * static_cast<F>(load(map[at[k]]));
    return v;
  }
  // d value / dy and d value / dx.
  template <class T>
  void slopes(const T* map, F& dy, F& dx) const {
    F v[4];
    for (int k = 0; k < 4; ++k) v[k] = at[k] >= 0 ? static_cast<F>(load(map[at[k]])) : F(0);
    dy = (1 - lx) * (v[2] - v[0]) + lx * (v[3] - v[1]);
    dx = (1 - ly) * (v[1] - v[0]) + ly * (v[3] - v[2]);
  }
};

// Places with y <= -2 or y >= H (x alike; NaN too) have no corner inside. Between -2 and -1 every
// corner with a weight is outside, so the value is 0 as torchvision's forward has it, while the
// slopes at exactly y = -1 keep the inside corner's term, as torchvision's offset gradient does.
template <class F>
Tap<F> tap(F y, F x, int64_t height, int64_t width) {
  Tap<F> t;
  if (!(y > -2 && y < static_cast<F>(height) && x > -2 && x < static_cast<F>(width))) return t;
  const F fy = std::floor(y), fx = std::floor(x);
  const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx), y1 = y0 + 1, x1 = x0 + 1;
  t.ly = y - fy;
  t.lx = x - fx;
  const bool in_y[2] = {y0 >= 0 && y0 < height, y1 >= 0 && y1 < height};
  const bool in_x[2] = {x0 >= 0 && x0 < width, x1 >= 0 && x1 < width};
  const int64_t ys[2] = {y0, y1}, xs[2] = {x0, x1};
  for (int k = 0; k < 4; ++k)
    if (in_y[k / 2] && in_x[k % 2]) t.at[k] = ys[k / 2] * width + xs[k % 2];
  return t;
}

// Every tap of image n: [offset group][kernel tap][output pixel].
template <class F, class T>
std::vector<Tap<F>> image_taps(const DeformGeometry& g, const T* offset, int64_t n) {
  std::vector<Tap<F>> taps(static_cast<size_t>(g.offset_groups * g.taps() * g.pixels()));
  for (int64_t og = 0; og < g.offset_groups; ++og)
    for (int64_t k = 0; k < g.taps(); ++k) {
      const T* dy = offset + ((n * g.offset_groups + og) * 2 * g.taps() + 2 * k) * g.pixels();
      const T* dx = dy + g.pixels();
      const int64_t i = k / g.kw, j = k % g.kw;
      Tap<F>* out = taps.data() + (og * g.taps() + k) * g.pixels();
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t p = oy * g.ow + ox;
          const F y = static_cast<F>(oy * g.stride[0] - g.pad[0] + i * g.dilation[0]) + static_cast<F>(load(dy[p]));
          const F x = static_cast<F>(ox * g.stride[1] - g.pad[1] + j * g.dilation[1]) + static_cast<F>(load(dx[p]));
          out[p] = tap(y, x, g.h, g.w);
        }
    }
  return taps;
}

// The column matrix of image n and group grp: [C/group · K, oH·oW], each sample times its mask.
template <class F, class T>
void deform_columns(const DeformGeometry& g, const std::vector<Tap<F>>& taps, const T* x, const T* mask, int64_t n,
                    int64_t grp, F* cols, int threads) {
  const int64_t cg = g.channels_per_group(), px = g.pixels();
  parallel_for(cg, threads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t channel = grp * cg + ci, og = g.offset_group_of(channel);
      const T* map = x + (n * g.c + channel) * g.h * g.w;
      for (int64_t k = 0; k < g.taps(); ++k) {
        const Tap<F>* t = taps.data() + (og * g.taps() + k) * px;
        const T* mk = mask ? mask + ((n * g.offset_groups + og) * g.taps() + k) * px : nullptr;
        F* row = cols + (ci * g.taps() + k) * px;
        for (int64_t p = 0; p < px; ++p) row[p] = t[p].value(map) * (mk ? static_cast<F>(load(mk[p])) : F(1));
      }
    }
  });
}

template <class F, class T>
std::vector<F> widened(const View& v) {
  std::vector<F> out(static_cast<size_t>(v.numel()));
  const T* in = v.as<T>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<F>(load(in[i]));
  return out;
}

template <class T>
using Wide = std::conditional_t<std::is_same_v<T, double>, double, float>;

// DeformConv(X, W, offset[, B][, mask]).
class DeformConv final : public Kernel {
 public:
  DeformConv(const Node& n, int64_t) : a_(n) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    a_.geometry(io.input(0), io.input(1), io.input(2), io.has_in(4) ? &io.input(4) : nullptr);
    return 0;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &w = io.input(1), &offset = io.input(2);
    const DeformGeometry g = a_.geometry(x, w, offset, io.has_in(4) ? &io.input(4) : nullptr);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using F = Wide<T>;
      const std::vector<F> weights = widened<F, T>(w);
      const T* bias = io.has_in(3) ? io.input(3).as<T>() : nullptr;
      const T* mask = io.has_in(4) ? io.input(4).as<T>() : nullptr;
      const int64_t px = g.pixels(), mg = g.outputs_per_group(), rows = g.rows();
      std::vector<F> cols(static_cast<size_t>(rows * px)), y(static_cast<size_t>(g.m * px));
      T* out = io.output(0).as<T>();
      for (int64_t n = 0; n < g.n; ++n) {
        const std::vector<Tap<F>> taps = image_taps<F>(g, offset.as<T>(), n);
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          deform_columns(g, taps, x.as<T>(), mask, n, grp, cols.data(), ctx.threads);
          parallel_gemm<F>(false, false, mg, px, rows, F(1), weights.data() + grp * mg * rows, rows, cols.data(), px, F(0),
                           y.data() + grp * mg * px, px, ctx.threads);
        }
        for (int64_t m = 0; m < g.m; ++m) {
          const F b = bias ? static_cast<F>(load(bias[m])) : F(0);
          for (int64_t p = 0; p < px; ++p) out[(n * g.m + m) * px + p] = store<T>(y[m * px + p] + b);
        }
      }
    });
  }

 private:
  DeformAttrs a_;
};

// DeformConvGrad(dY, X, W, offset[, mask]) -> dX, dW, doffset, dB, dmask (each optional).
class DeformConvGrad final : public Kernel {
 public:
  DeformConvGrad(const Node& n, int64_t) : a_(n) {}

  size_t infer(KernelIO& io) const override {
    const DeformGeometry g = a_.geometry(io.input(1), io.input(2), io.input(3), io.has_in(4) ? &io.input(4) : nullptr);
    const std::vector<int64_t> dy = {g.n, g.m, g.oh, g.ow};
    if (io.input(0).dims != dy) throw InputError("DeformConvGrad's dY must be " + dims_str(dy) + ", not " + dims_str(io.input(0).dims));
    if (io.has_out(4) && !io.has_in(4)) throw InputError("DeformConvGrad gives dmask only for a DeformConv with a mask");
    for (size_t k = 0; k < 5; ++k) {
      if (!io.has_out(k)) continue;
      io.output(k).dtype = io.input(0).dtype;
      io.output(k).dims = k == 3 ? std::vector<int64_t>{g.m} : io.input(k < 3 ? k + 1 : 4).dims;
    }
    return 0;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &dy = io.input(0), &x = io.input(1), &w = io.input(2), &offset = io.input(3);
    const DeformGeometry g = a_.geometry(x, w, offset, io.has_in(4) ? &io.input(4) : nullptr);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using F = Wide<T>;
      const std::vector<F> weights = widened<F, T>(w), grad = widened<F, T>(dy);
      const T* mask = io.has_in(4) ? io.input(4).as<T>() : nullptr;
      const T* image = x.as<T>();
      const int64_t px = g.pixels(), mg = g.outputs_per_group(), rows = g.rows(), cg = g.channels_per_group();
      const bool want_x = io.has_out(0), want_w = io.has_out(1), want_offset = io.has_out(2), want_mask = io.has_out(4);
      const bool spread = want_x || want_offset || want_mask;
      std::vector<F> cols(want_w ? static_cast<size_t>(rows * px) : 0), dcols(spread ? static_cast<size_t>(rows * px) : 0);
      std::vector<F> dw(want_w ? static_cast<size_t>(w.numel()) : 0, F(0));
      std::vector<double> dx(want_x ? static_cast<size_t>(x.numel()) : 0, 0.0);
      std::vector<double> doff(want_offset ? static_cast<size_t>(offset.numel()) : 0, 0.0);
      std::vector<double> dmask(want_mask ? static_cast<size_t>(io.input(4).numel()) : 0, 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const std::vector<Tap<F>> taps = image_taps<F>(g, offset.as<T>(), n);
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const F* dy_g = grad.data() + (n * g.m + grp * mg) * px;
          if (want_w) {
            deform_columns(g, taps, image, mask, n, grp, cols.data(), ctx.threads);
            parallel_gemm<F>(false, true, mg, rows, px, F(1), dy_g, px, cols.data(), px, F(1), dw.data() + grp * mg * rows,
                             rows, ctx.threads);
          }
          if (!spread) continue;
          parallel_gemm<F>(true, false, rows, px, mg, F(1), weights.data() + grp * mg * rows, rows, dy_g, px, F(0),
                           dcols.data(), px, ctx.threads);
          // Channels of one offset group share their offsets and mask: one group's sums at a time.
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t channel = grp * cg + ci, og = g.offset_group_of(channel);
            const T* map = image + (n * g.c + channel) * g.h * g.w;
            double* dmap = want_x ? dx.data() + (n * g.c + channel) * g.h * g.w : nullptr;
            for (int64_t k = 0; k < g.taps(); ++k) {
              const Tap<F>* t = taps.data() + (og * g.taps() + k) * px;
              const int64_t mask_row = ((n * g.offset_groups + og) * g.taps() + k) * px;
              const int64_t offset_row = ((n * g.offset_groups + og) * 2 * g.taps() + 2 * k) * px;
              const F* d = dcols.data() + (ci * g.taps() + k) * px;
              for (int64_t p = 0; p < px; ++p) {
                if (d[p] == 0) continue;
                const F mk = mask ? static_cast<F>(load(mask[mask_row + p])) : F(1), dm = d[p] * mk;
                if (dmap)
                  for (int c = 0; c < 4; ++c)
                    if (t[p].at[c] >= 0) dmap[t[p].at[c]] += static_cast<double>(dm * t[p].weight(c));
                if (want_offset) {
                  F sy, sx;
                  t[p].slopes(map, sy, sx);
                  doff[static_cast<size_t>(offset_row + p)] += static_cast<double>(dm * sy);
                  doff[static_cast<size_t>(offset_row + px + p)] += static_cast<double>(dm * sx);
                }
                if (want_mask) dmask[static_cast<size_t>(mask_row + p)] += static_cast<double>(d[p] * t[p].value(map));
              }
            }
          }
        }
      }
      auto put = [](const auto& acc, const View& v) {
        T* out = v.as<T>();
        for (size_t i = 0; i < acc.size(); ++i) out[i] = convert<T>(acc[i]);
      };
      if (want_x) put(dx, io.output(0));
      if (want_w) put(dw, io.output(1));
      if (want_offset) put(doff, io.output(2));
      if (want_mask) put(dmask, io.output(4));
      if (io.has_out(3)) {
        std::vector<double> db(static_cast<size_t>(g.m), 0.0);
        for (int64_t n = 0; n < g.n; ++n)
          for (int64_t m = 0; m < g.m; ++m)
            for (int64_t p = 0; p < px; ++p) db[static_cast<size_t>(m)] += static_cast<double>(grad[(n * g.m + m) * px + p]);
        put(db, io.output(3));
      }
    });
  }

 private:
  DeformAttrs a_;
};

}  // namespace

const std::vector<OpEntry>& deform_conv_ops() {
  static const std::vector<OpEntry> ops = {{"DeformConv", make_kernel<DeformConv>, FloatTypes::mask(), {}},
                                           {"DeformConvGrad", make_kernel<DeformConvGrad>, FloatTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
