// ConvTranspose (1-D to 3-D; strides, pads, dilations, groups, output_padding, output_shape,
// auto_pad) as the transpose of Conv's im2col GEMM, per image and group:
//   col (M/g*K x H*W) = W[g]^T (M/g*K x C/g) @ X[g] (C/g x H*W)
// then col2im adds each column entry onto the output pixel a Conv with the same window would have
// read it from: Y[m][x*S - P + k*D] += col[(m, k)][x]. The output starts as the bias. 16-bit inputs
// are widened to fp32 (weights once, each image group as it is used), accumulated in fp32 and
// rounded once on store. Images are spread over the cores; one image alone uses every core inside
// the product and col2im (over output channels).
#include <cstring>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/conv_transpose.h"

namespace amp::cpu {
namespace {

// The geometry padded out to 3 spatial dims (a 1-D one is a 3-D one of depth and height 1).
struct Geometry {
  int64_t n, c, m, groups;
  int64_t in[3], k[3], out[3], s[3], d[3], p[3];
  int64_t kernel_size() const { return k[0] * k[1] * k[2]; }
  int64_t col_rows() const { return m / groups * kernel_size(); }
  int64_t in_pixels() const { return in[0] * in[1] * in[2]; }
  int64_t out_pixels() const { return out[0] * out[1] * out[2]; }
};

// image[m][o] += col[(m*K + kernel offset)][input position], o = input position * S - P + offset * D,
// entries that land outside the output dropped. Output channels are independent.
template <class F>
void col2im(const F* col, int64_t channels, const Geometry& g, F* image, int threads) {
  const int64_t ks = g.kernel_size(), px = g.in_pixels();
  parallel_for(channels, threads, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      F* plane = image + c * g.out_pixels();
      for (int64_t kk = 0; kk < ks; ++kk) {
        const int64_t i = kk / (g.k[1] * g.k[2]), j = kk / g.k[2] % g.k[1], l = kk % g.k[2];
        const F* src = col + (c * ks + kk) * px;
        for (int64_t z = 0; z < g.in[0]; ++z) {
          const int64_t oz = z * g.s[0] - g.p[0] + i * g.d[0];
          if (oz < 0 || oz >= g.out[0]) continue;
          for (int64_t y = 0; y < g.in[1]; ++y) {
            const int64_t oy = y * g.s[1] - g.p[1] + j * g.d[1];
            if (oy < 0 || oy >= g.out[1]) continue;
            F* row = plane + (oz * g.out[1] + oy) * g.out[2];
            const F* s = src + (z * g.in[1] + y) * g.in[2];
            const int64_t shift = l * g.d[2] - g.p[2], sw = g.s[2];
            // Input columns x whose output column x*SW + shift lies in [0, OW).
            const int64_t x_lo = std::min(g.in[2], shift >= 0 ? 0 : (-shift + sw - 1) / sw);
            const int64_t x_hi = std::max(x_lo, std::min(g.in[2], g.out[2] - shift <= 0 ? 0 : (g.out[2] - shift + sw - 1) / sw));
            if (sw == 1) {
              F* o = row + shift;
#pragma omp simd
              for (int64_t x = x_lo; x < x_hi; ++x) o[x] += s[x];
            } else {
              for (int64_t x = x_lo; x < x_hi; ++x) row[x * sw + shift] += s[x];
            }
          }
        }
      }
    }
  });
}

class ConvTranspose final : public Kernel {
 public:
  ConvTranspose(const Node& n, int64_t) : attrs_(n) {}

  size_t infer(KernelIO& io) const override {
    const View &x = io.input(0), &w = io.input(1);
    if (x.rank() < 3 || x.rank() > 5)
      throw InputError("ConvTranspose supports 1-D to 3-D convolutions, X is " + dims_str(x.dims));
    infer_outputs(io);
    const Geometry g = geometry(x, w);
    const Scratch sc = scratch_layout(g, x.dtype, w.numel(), io.threads);
    return sc.weights + sc.per_worker * static_cast<size_t>(sc.workers);
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &w = io.input(1);
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
      const T* bias = io.has_in(2) ? io.input(2).as<T>() : nullptr;
      const int64_t cg = g.c / g.groups, mg = g.m / g.groups, rows = g.col_rows(), ipx = g.in_pixels(),
                    opx = g.out_pixels();
      const int inner = sc.workers == 1 ? ctx.threads : 1;
#pragma omp parallel for num_threads(sc.workers) schedule(static, 1) if (sc.workers > 1)
      for (int worker = 0; worker < sc.workers; ++worker) {
        uint8_t* mine = scratch + sc.weights + sc.per_worker * static_cast<size_t>(worker);
        F* col = reinterpret_cast<F*>(mine);
        F* x32 = reinterpret_cast<F*>(mine + sc.columns);
        F* y32 = reinterpret_cast<F*>(mine + sc.columns + sc.image);
        for (int64_t n = g.n * worker / sc.workers; n < g.n * (worker + 1) / sc.workers; ++n) {
          F* yimg = kWide ? reinterpret_cast<F*>(out + n * g.m * opx) : y32;
          parallel_for(g.m, inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(opx, 1)),
                       [&](int64_t m0, int64_t m1) {
                         for (int64_t m = m0; m < m1; ++m)
                           std::fill(yimg + m * opx, yimg + (m + 1) * opx, bias ? static_cast<F>(load(bias[m])) : F(0));
                       });
          for (int64_t grp = 0; grp < g.groups; ++grp) {
            const T* image = in + (n * g.c + grp * cg) * ipx;
            const F* xs;
            if constexpr (kWide) {
              xs = image;
            } else {
              widen(image, x32, cg * ipx, inner);
              xs = x32;
            }
            parallel_gemm<F>(true, false, rows, ipx, cg, F(1), weights + grp * cg * rows, rows, xs, ipx, F(0), col, ipx,
                             inner);
            col2im(col, mg, g, yimg + grp * mg * opx, inner);
          }
          if constexpr (!kWide) narrow(yimg, out + n * g.m * opx, g.m * opx, inner);
        }
      }
    });
  }

 private:
  // Scratch: fp32 weights (16-bit types), then per worker a column matrix and, for 16-bit types,
  // an fp32 copy of one image group and an fp32 output image; each 64-byte aligned.
  struct Scratch {
    int workers;
    size_t weights, columns, image, per_worker;
  };
  static Scratch scratch_layout(const Geometry& g, DType t, int64_t weight_count, int threads) {
    const bool low = is_low_precision(t);
    const size_t elem = t == DType::kDouble ? 8 : 4;
    auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
    Scratch s;
    s.workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, g.n)));
    s.weights = low ? fp32_scratch(weight_count) : 0;
    s.columns = aligned(static_cast<size_t>(g.col_rows() * g.in_pixels()) * elem);
    s.image = low ? fp32_scratch(g.c / g.groups * g.in_pixels()) : 0;
    s.per_worker = s.columns + s.image + (low ? fp32_scratch(g.m * g.out_pixels()) : 0);
    return s;
  }

  Geometry geometry(const View& x, const View& w) const {
    const std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(w.dims.begin() + 2, w.dims.end());
    const TransposedWindow win = make_transposed_window(attrs_, in, k);
    Geometry g{x.dims[0], x.dims[1], w.dims[1] * attrs_.group, attrs_.group, {}, {}, {}, {}, {}, {}};
    const size_t shift = 3 - in.size();
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

  ConvTransposeAttrs attrs_;
};

}  // namespace

const std::vector<OpEntry>& conv_transpose_ops() {
  static const std::vector<OpEntry> ops = {
      {"ConvTranspose", make_kernel<ConvTranspose>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
