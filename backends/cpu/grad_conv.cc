// ConvGrad: the gradients of Conv (1-D to 3-D; pads, strides, dilations, groups; 3-D on oneDNN only). fp32, bf16 and
// fp16 (widened to fp32) run on oneDNN's backward-data and backward-weights convolutions
// (backends/cpu/onednn_conv.h) where oneDNN implements the geometry; the weights' and bias' sums
// come back in fp32 and are rounded once. Otherwise, and for double, the same im2col GEMMs as the
// forward kernel, per image and group:
//   dW[g] += dY[g] (M/g x OH*OW) @ col^T          (col: C/g*KH*KW x OH*OW of the input image)
//   dcol   = W[g]^T (C/g*KH*KW x M/g) @ dY[g]     then col2im adds dcol back onto dX's pixels
//   dB     = dY summed over images and pixels.
// 16-bit tensors are widened to fp32 and every sum is accumulated in fp32 (fp64 for double) and
// rounded once, as a GPU's backward convolutions do.
#include <cstring>
#include <memory>

#include "backends/cpu/blas.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/onednn_conv.h"
#include "backends/cpu/onednn_runtime.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

struct Geometry {
  int64_t n, c, h, w, m, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw, groups;
  int64_t rows() const { return c / groups * kh * kw; }
  int64_t pixels() const { return oh * ow; }
};

// col[(c*KH + i)*KW + j][y*OW + x] = image[c][y*SH - PH + i*DH][x*SW - PW + j*DW], 0 outside.
template <class T, class F>
void im2col(const T* image, int64_t channels, const Geometry& g, F* col, int threads) {
  parallel_for(channels * g.kh * g.kw, threads, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
      const T* plane = image + c * g.h * g.w;
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t iy = y * g.sh - g.ph + i * g.dh;
        F* row = col + r * g.pixels() + y * g.ow;
        for (int64_t x = 0; x < g.ow; ++x) {
          const int64_t ix = x * g.sw - g.pw + j * g.dw;
          row[x] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? static_cast<F>(load(plane[iy * g.w + ix])) : F(0);
        }
      }
    }
  });
}

// The transpose of im2col: each column entry is added to the pixel it was read from. Channels are
// independent, so they are spread over the cores.
template <class F>
void col2im(const F* col, int64_t channels, const Geometry& g, F* image, int threads) {
  parallel_for(channels, threads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      F* plane = image + c * g.h * g.w;
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const F* src = col + ((c * g.kh + i) * g.kw + j) * g.pixels();
          for (int64_t y = 0; y < g.oh; ++y) {
            const int64_t iy = y * g.sh - g.ph + i * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t x = 0; x < g.ow; ++x) {
              const int64_t ix = x * g.sw - g.pw + j * g.dw;
              if (ix >= 0 && ix < g.w) plane[iy * g.w + ix] += src[y * g.ow + x];
            }
          }
        }
    }
  });
}

class ConvGrad final : public Kernel {
 public:
  ConvGrad(const Node& n, int64_t) : attrs_(n), groups_(n.attr_int("group", 1)) {}

  size_t infer(KernelIO& io) const override {
    const View &dy = io.input(0), &x = io.input(1), &w = io.input(2);
    if (dy.dtype != x.dtype || w.dtype != x.dtype) throw InputError("ConvGrad inputs have different element types");
    if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
      throw InputError("ConvGrad supports 1-D to 3-D convolutions, X is " + dims_str(x.dims) + " and W " +
                       dims_str(w.dims));
    const int64_t groups = groups_, c = x.dims[1], m = w.dims[0];
    if (groups <= 0 || c % groups || m % groups || w.dims[1] * groups != c)
      throw InputError("ConvGrad channels do not match: X " + dims_str(x.dims) + ", W " + dims_str(w.dims));
    std::vector<int64_t> ydims = {x.dims[0], m};
    for (int64_t e : window_of(x, w).out) ydims.push_back(e);
    if (dy.dims != ydims) throw InputError("ConvGrad dY " + dims_str(dy.dims) + " should be " + dims_str(ydims));
    const View* like[3] = {&x, &w, nullptr};
    for (size_t i = 0; i < 3; ++i) {
      if (!io.has_out(i)) continue;
      io.output(i).dtype = x.dtype;
      io.output(i).dims = like[i] ? like[i]->dims : std::vector<int64_t>{m};
    }
    if (const DnnlConvBackward* fast = onednn(io)) return fast->scratch_bytes() + Staged(io).bytes();
    // The im2col path below is 1-D and 2-D; 3-D gradients run on oneDNN only.
    if (x.rank() == 5)
      throw InputError("ConvGrad of a 3-D convolution runs on oneDNN only (fp32, fp16, bf16 on an AVX-512 CPU), not " +
                       std::string(dtype_name(x.dtype)) + " here");
    return scratch_layout(x, w, geometry(x, w)).total;
  }

  std::vector<LayoutWish> layout_preferences(const KernelIO& io) const override {
    const DnnlConvBackward* fast = onednn(io);
    if (!fast) return {};
    std::vector<LayoutWish> wishes;
    if (io.has_out(0) && fast->data_weights_layout()) wishes.push_back({false, 2, fast->data_weights_layout()});
    if (io.has_out(1) && fast->diff_weights_layout()) wishes.push_back({true, 1, fast->diff_weights_layout()});
    return wishes;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    if (const DnnlConvBackward* fast = onednn(io)) {
      run_onednn(*fast, io);
      return;
    }
    if (io.input(2).layout || (io.has_out(1) && io.output(1).layout))
      throw Error("ConvGrad: W or dW is in a blocked layout but oneDNN does not run this convolution");
    const View &dyv = io.input(0), &x = io.input(1), &w = io.input(2);
    const Geometry g = geometry(x, w);
    const Scratch s = scratch_layout(x, w, g);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
      uint8_t* base = static_cast<uint8_t*>(io.workspace);
      F* col = reinterpret_cast<F*>(base + s.col);
      F* dcol = reinterpret_cast<F*>(base + s.dcol);
      F* dy = reinterpret_cast<F*>(base + s.dy);
      F* wts = reinterpret_cast<F*>(base + s.w);
      F* dw = reinterpret_cast<F*>(base + s.dw);
      F* dx = reinterpret_cast<F*>(base + s.dx);
      widen_to(w.as<T>(), wts, w.numel(), ctx.threads);
      std::fill(dw, dw + w.numel(), F(0));
      std::vector<F> db(static_cast<size_t>(g.m), F(0));
      const int64_t cg = g.c / g.groups, mg = g.m / g.groups, rows = g.rows(), px = g.pixels();
      for (int64_t n = 0; n < g.n; ++n) {
        widen_to(dyv.as<T>() + n * g.m * px, dy, g.m * px, ctx.threads);
        if (io.has_out(2))
          for (int64_t m = 0; m < g.m; ++m)
            for (int64_t i = 0; i < px; ++i) db[static_cast<size_t>(m)] += dy[m * px + i];
        if (io.has_out(0)) std::fill(dx, dx + g.c * g.h * g.w, F(0));
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          const F* dy_g = dy + grp * mg * px;
          if (io.has_out(1)) {
            im2col(x.as<T>() + (n * g.c + grp * cg) * g.h * g.w, cg, g, col, ctx.threads);
            gemm<F>(false, true, mg, rows, px, F(1), dy_g, px, col, px, F(1), dw + grp * mg * rows, rows);
          }
          if (io.has_out(0)) {
            gemm<F>(true, false, rows, px, mg, F(1), wts + grp * mg * rows, rows, dy_g, px, F(0), dcol, px);
            col2im(dcol, cg, g, dx + grp * cg * g.h * g.w, ctx.threads);
          }
        }
        if (io.has_out(0)) narrow_to(dx, io.output(0).as<T>() + n * g.c * g.h * g.w, g.c * g.h * g.w, ctx.threads);
      }
      if (io.has_out(1)) narrow_to(dw, io.output(1).as<T>(), w.numel(), ctx.threads);
      if (io.has_out(2))
        for (int64_t m = 0; m < g.m; ++m) io.output(2).as<T>()[m] = store<T>(static_cast<compute_t<T>>(db[m]));
    });
  }

 private:
  struct Scratch {
    size_t col, dcol, dy, w, dw, dx, total;
  };

  static size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

  Scratch scratch_layout(const View& x, const View& w, const Geometry& g) const {
    const size_t e = x.dtype == DType::kDouble ? 8 : 4;
    Scratch s{};
    size_t at = 0;
    auto take = [&](size_t elements) {
      const size_t here = at;
      at += aligned(elements * e);
      return here;
    };
    s.col = take(static_cast<size_t>(g.rows() * g.pixels()));
    s.dcol = take(static_cast<size_t>(g.rows() * g.pixels()));
    s.dy = take(static_cast<size_t>(g.m * g.pixels()));
    s.w = take(static_cast<size_t>(w.numel()));
    s.dw = take(static_cast<size_t>(w.numel()));
    s.dx = take(static_cast<size_t>(g.c * g.h * g.w));
    s.total = at;
    return s;
  }

  template <class T, class F>
  static void widen_to(const T* in, F* out, int64_t n, int threads) {
    parallel_for(n, threads, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<F>(load(in[i]));
    });
  }
  template <class F, class T>
  static void narrow_to(const F* in, T* out, int64_t n, int threads) {
    parallel_for(n, threads, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = store<T>(static_cast<compute_t<T>>(in[i]));
    });
  }

  Geometry geometry(const View& x, const View& w) const {
    const Window win = window_of(x, w);
    const bool one_d = x.rank() == 3;
    auto first = [&](const std::vector<int64_t>& v, int64_t one) { return one_d ? one : v[0]; };
    return Geometry{x.dims[0],
                    x.dims[1],
                    one_d ? 1 : x.dims[2],
                    x.dims.back(),
                    w.dims[0],
                    first(win.kernel, 1),
                    win.kernel.back(),
                    first(win.out, 1),
                    win.out.back(),
                    first(win.strides, 1),
                    win.strides.back(),
                    first(win.dilations, 1),
                    win.dilations.back(),
                    first(win.pads_begin, 0),
                    win.pads_begin.back(),
                    groups_};
  }

  // What the oneDNN path keeps in the workspace after oneDNN's own scratch: for fp16, fp32 copies
  // of W and of a chunk of images' dY, X and dX (fp16_chunk: half the batch), and one chunk's dW and dB, which
  // are added into the fp32 sums; the fp32 sums of dW and dB wherever the output is not fp32
  // itself (or dW is not asked for but dB is: oneDNN computes them together).
  struct Staged {
    size_t dy = 0, x = 0, w = 0, dx = 0, dw = 0, db = 0, dw_part = 0, db_part = 0;
    explicit Staged(const KernelIO& io) {
      const View& xv = io.input(1);
      const bool half = xv.dtype == DType::kFloat16, fp32 = xv.dtype == DType::kFloat;
      const int64_t n = std::max<int64_t>(1, xv.dims[0]), images = half ? fp16_chunk(n) : n;
      const int64_t weights = io.input(2).numel(), m = io.input(2).dims[0];
      if (half) {
        dy = fp32_scratch(io.input(0).numel() / n * images);
        x = fp32_scratch(xv.numel() / n * images);
        w = fp32_scratch(weights);
        if (io.has_out(0)) dx = fp32_scratch(xv.numel() / n * images);
        if (images < n && (io.has_out(1) || io.has_out(2))) {
          dw_part = fp32_scratch(weights);
          if (io.has_out(2)) db_part = fp32_scratch(m);
        }
      }
      // oneDNN writes bf16 weight gradients itself; fp16's are summed in fp32 across chunks.
      if ((io.has_out(1) && half) || (io.has_out(2) && !io.has_out(1))) dw = fp32_scratch(weights);
      if (io.has_out(2) && !fp32) db = fp32_scratch(m);
    }
    size_t bytes() const { return dy + x + w + dx + dw + db + dw_part + db_part; }
  };

  void run_onednn(const DnnlConvBackward& fast, KernelIO& io) const {
    const View &dy = io.input(0), &x = io.input(1), &w = io.input(2);
    auto* scratch = static_cast<uint8_t*>(io.workspace);
    const Staged st(io);
    uint8_t* at = scratch + fast.scratch_bytes();
    auto take = [&](size_t bytes) {
      uint8_t* p = bytes ? at : nullptr;
      at += bytes;
      return reinterpret_cast<float*>(p);
    };
    float *dy32 = take(st.dy), *x32 = take(st.x), *w32 = take(st.w), *dx32 = take(st.dx), *dw32 = take(st.dw),
          *db32 = take(st.db), *dw_part = take(st.dw_part), *db_part = take(st.db_part);
    const int threads = io.threads;
    const bool half = x.dtype == DType::kFloat16;
    void* dw = dw32 ? static_cast<void*>(dw32) : (io.has_out(1) ? io.output(1).data : nullptr);
    float* db = db32 ? db32 : (io.has_out(2) ? io.output(2).as<float>() : nullptr);
    if (!half) {
      fast.run(dy.data, x.data, w.data, io.has_out(0) ? io.output(0).data : nullptr, dw, db, scratch);
    } else {
      // A chunk of images at a time; the weights' and bias' sums are carried across chunks in fp32.
      const int64_t n = x.dims[0], images = fp16_chunk(n);
      const int64_t x_image = x.numel() / n, y_image = dy.numel() / n;
      widen(w.as<f16>(), w32, w.numel(), threads);
      for (int64_t i = 0; i < n; i += images) {
        widen(dy.as<f16>() + i * y_image, dy32, images * y_image, threads);
        widen(x.as<f16>() + i * x_image, x32, images * x_image, threads);
        const bool first = i == 0;
        float* dw_to = first || !dw_part ? dw32 : dw_part;
        float* db_to = first || !db_part ? db : db_part;
        fast.run(dy32, x32, w32, dx32, dw_to, db_to, scratch);
        if (io.has_out(0)) narrow(dx32, io.output(0).as<f16>() + i * x_image, images * x_image, threads);
        if (!first && dw_part) {
          for (int64_t k = 0; k < w.numel(); ++k) dw32[k] += dw_part[k];
          if (db_part)
            for (int64_t k = 0; k < w.dims[0]; ++k) db[k] += db_part[k];
        }
      }
    }
    if (x.dtype == DType::kFloat) return;
    dispatch(TypeList<f16, bf16>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (half && dw32 && io.has_out(1)) narrow(dw32, io.output(1).as<T>(), w.numel(), threads);
      if (db32) narrow(db32, io.output(2).as<T>(), io.output(2).numel(), threads);
    });
  }

  Window window_of(const View& x, const View& w) const { return conv_window(attrs_, x.dims, w.dims); }

  // The oneDNN convolution gradients for these inputs and wanted outputs, made on first use per
  // input signature; null for double and where oneDNN has no implementation.
  const DnnlConvBackward* onednn(const KernelIO& io) const {
    const View &x = io.input(1), &w = io.input(2);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16) return nullptr;
    const bool dx = io.has_out(0), dw = io.has_out(1), db = io.has_out(2);
    const int w_layout = w.layout, dw_layout = dw ? io.output(1).layout : 0;
    const int tag = (static_cast<int>(x.dtype) * 8 + dx * 4 + dw * 2 + db) | w_layout << 8 | dw_layout << 18;
    return prepared_.find_or_make(x.dims, w.dims, tag, io.threads, [&] {
      const ConvShape s = conv_shape(x.dims, w.dims[0], groups_, window_of(x, w), x.dtype == DType::kFloat16);
      return std::make_unique<DnnlConvBackward>(s, x.dtype == DType::kBFloat16 ? DnnlType::kBF16 : DnnlType::kF32,
                                                dx, dw, db, io.threads, w_layout, dw_layout);
    });
  }

  WindowAttrs attrs_;
  int64_t groups_;
  onednn::PrimitiveCache<DnnlConvBackward> prepared_;
};

}  // namespace

const std::vector<OpEntry>& grad_conv_ops() {
  static const std::vector<OpEntry> ops = {
      {"ConvGrad", make_kernel<ConvGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
