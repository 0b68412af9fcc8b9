// Resize (nearest, linear and cubic, graph/ops/resize.h's geometry) and its gradient, ai.onnx_amp
// ResizeGrad. An output element interpolates over the axes that interpolate (those with a tap of
// non-zero weight; cubic: those where some output is not one input copied), nested as PyTorch's
// upsample kernels nest them: h0 (w0 x00 + w1 x01) + h1 (...). 16-bit types compute in fp32 and
// round once (cubic sums its 4^k terms in fp64 first); the gradient adds every dY element, times
// its weights, into the inputs it read, in fp64 and in output order (the same result on any number
// of cores).
#include <cmath>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/resize.h"

namespace amp::cpu {
namespace {

std::vector<float> float_values(const View& v) {
  std::vector<float> out;
  dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < v.numel(); ++i) out.push_back(static_cast<float>(load(v.as<T>()[i])));
  });
  return out;
}

// Per axis, its taps (cubic: its cubic taps); `active` lists the axes that interpolate.
struct Plan {
  std::vector<std::vector<ResizeTap>> taps;
  std::vector<std::vector<CubicTap>> cubic;
  std::vector<size_t> active;
};

// A cubic tap that copies one input: weight 1 on it, 0 on the others; `at` gets its slot.
bool copies(const CubicTap& t, int* at) {
  int ones = 0;
  for (int k = 0; k < 4; ++k) {
    if (t.w[k] == 1) {
      *at = k;
      ++ones;
    } else if (t.w[k] != 0) {
      return false;
    }
  }
  return ones == 1;
}

Plan plan(const ResizeAttrs& a, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
          const std::vector<float>& scales) {
  Plan p;
  const std::vector<double> s = resize_inverse_scales(in, out, scales);
  for (size_t d = 0; d < in.size(); ++d) {
    const double resized = scales.size() == in.size() ? static_cast<double>(in[d]) * static_cast<double>(scales[d])
                                                      : static_cast<double>(out[d]);
    bool any = false;
    if (a.mode == ResizeAttrs::Mode::kCubic) {
      p.cubic.push_back(resize_cubic_taps(a, in[d], out[d], s[d], resized));
      int at = 0;
      for (const CubicTap& t : p.cubic.back()) any = any || !copies(t, &at);
    } else {
      p.taps.push_back(resize_taps(a, in[d], out[d], s[d], resized));
      for (const ResizeTap& t : p.taps.back()) any = any || t.w != 0;
    }
    if (any) p.active.push_back(d);
  }
  return p;
}

// Cubic: the offset of an output element's reads along the axes that copy (the active axes add
// theirs while nesting), given its coordinates.
int64_t cubic_base(const Plan& p, const std::vector<int64_t>& coord, const std::vector<int64_t>& in_strides) {
  int64_t base = 0;
  size_t next_active = 0;
  for (size_t d = 0; d < coord.size(); ++d) {
    if (next_active < p.active.size() && p.active[next_active] == d) {
      ++next_active;
      continue;
    }
    const CubicTap& t = p.cubic[d][static_cast<size_t>(coord[d])];
    int at = 0;
    copies(t, &at);
    base += t.i[at] * in_strides[d];
  }
  return base;
}

// Row-major coordinates of element e of dims.
void coordinates(int64_t e, const std::vector<int64_t>& dims, std::vector<int64_t>& coord) {
  for (size_t d = dims.size(); d-- > 0;) {
    coord[d] = e % dims[d];
    e /= dims[d];
  }
}

void run_cubic(const Plan& p, const View& x, View& y, int threads) {
  dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* src = x.as<T>();
    T* dst = y.as<T>();
    const std::vector<int64_t> in_strides = strides_of(x.dims);
    parallel_for(y.numel(), threads, 4096, [&](int64_t e0, int64_t e1) {
      std::vector<int64_t> coord(x.rank());
      for (int64_t e = e0; e < e1; ++e) {
        coordinates(e, y.dims, coord);
        // Nested over the active axes: value(k, off) = sum_j w_j value(k + 1, off + i_j stride).
        auto value = [&](auto&& self, size_t k, int64_t off) -> double {
          if (k == p.active.size()) return static_cast<double>(load(src[off]));
          const size_t d = p.active[k];
          const CubicTap& t = p.cubic[d][static_cast<size_t>(coord[d])];
          double acc = 0;
          for (int j = 0; j < 4; ++j)
            if (t.w[j] != 0) acc += t.w[j] * self(self, k + 1, off + t.i[j] * in_strides[d]);
          return acc;
        };
        dst[e] = store<T>(static_cast<C>(value(value, 0, cubic_base(p, coord, in_strides))));
      }
    });
  });
}

// Nearest's and linear's gradient: each dY element times its weights, into the inputs it read
// (fp64, `acc`).
void spread_linear(const Plan& p, const View& dy, const std::vector<int64_t>& in_dims, std::vector<double>& acc) {
  dispatch(FloatTypes{}, dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dy.as<T>();
    const std::vector<int64_t> in_strides = strides_of(in_dims);
    const size_t rank = in_dims.size();
    std::vector<int64_t> coord(rank);
    for (int64_t e = 0; e < dy.numel(); ++e) {
      coordinates(e, dy.dims, coord);
      int64_t base = 0;
      for (size_t d = 0; d < rank; ++d) base += p.taps[d][static_cast<size_t>(coord[d])].i0 * in_strides[d];
      const double v = static_cast<double>(load(g[e]));
      auto spread = [&](auto&& self, size_t k, int64_t off, double weight) -> void {
        if (k == p.active.size()) {
          acc[static_cast<size_t>(off)] += weight * v;
          return;
        }
        const size_t d = p.active[k];
        const ResizeTap& t = p.taps[d][static_cast<size_t>(coord[d])];
        if (t.w == 0) return self(self, k + 1, off, weight);
        const double w = t.w;
        self(self, k + 1, off, weight * (1 - w));
        self(self, k + 1, off + (t.i1 - t.i0) * in_strides[d], weight * w);
      };
      spread(spread, 0, base, 1.0);
    }
  });
}

// Cubic's gradient: each dY element times its weights, into the inputs it read (fp64, `acc`).
void spread_cubic(const Plan& p, const View& dy, const std::vector<int64_t>& in_dims, std::vector<double>& acc) {
  dispatch(FloatTypes{}, dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dy.as<T>();
    const std::vector<int64_t> in_strides = strides_of(in_dims);
    std::vector<int64_t> coord(in_dims.size());
    for (int64_t e = 0; e < dy.numel(); ++e) {
      coordinates(e, dy.dims, coord);
      const double v = static_cast<double>(load(g[e]));
      auto spread = [&](auto&& self, size_t k, int64_t off, double weight) -> void {
        if (k == p.active.size()) {
          acc[static_cast<size_t>(off)] += weight * v;
          return;
        }
        const size_t d = p.active[k];
        const CubicTap& t = p.cubic[d][static_cast<size_t>(coord[d])];
        for (int j = 0; j < 4; ++j)
          if (t.w[j] != 0) self(self, k + 1, off + t.i[j] * in_strides[d], weight * t.w[j]);
      };
      spread(spread, 0, cubic_base(p, coord, in_strides), 1.0);
    }
  });
}

class Resize final : public Kernel {
 public:
  Resize(const Node& n, int64_t opset) : attrs_(resize_attrs(n, opset)), opset_(opset) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    View& y = io.output(0);
    const size_t scales_at = opset_ < 11 ? 1 : 2;
    const std::vector<float> scales = io.has_in(scales_at) ? float_values(io.input(scales_at)) : std::vector<float>{};
    const Plan p = plan(attrs_, x.dims, y.dims, scales);
    if (y.numel() == 0) return;
    if (attrs_.mode == ResizeAttrs::Mode::kCubic) return run_cubic(p, x, y, ctx.threads);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* src = x.as<T>();
      T* dst = y.as<T>();
      const std::vector<int64_t> in_strides = strides_of(x.dims);
      const size_t rank = x.rank();
      parallel_for(y.numel(), ctx.threads, 4096, [&](int64_t e0, int64_t e1) {
        std::vector<int64_t> coord(rank);
        for (int64_t e = e0; e < e1; ++e) {
          int64_t rest = e, base = 0;
          for (size_t d = rank; d-- > 0;) {
            coord[d] = rest % y.dims[d];
            rest /= y.dims[d];
          }
          for (size_t d = 0; d < rank; ++d) base += p.taps[d][static_cast<size_t>(coord[d])].i0 * in_strides[d];
          // Nested over the active axes: value(k, off) = (1 - w) value(k + 1, off) + w value(k + 1, off + step).
          auto value = [&](auto&& self, size_t k, int64_t off) -> C {
            if (k == p.active.size()) return load(src[off]);
            const size_t d = p.active[k];
            const ResizeTap& t = p.taps[d][static_cast<size_t>(coord[d])];
            const C lo = self(self, k + 1, off);
            if (t.w == 0) return lo;
            const C hi = self(self, k + 1, off + (t.i1 - t.i0) * in_strides[d]);
            const C w = static_cast<C>(t.w);
            return (static_cast<C>(1) - w) * lo + w * hi;
          };
          dst[e] = store<T>(value(value, 0, base));
        }
      });
    });
  }

 private:
  ResizeAttrs attrs_;
  int64_t opset_;
};

// ai.onnx_amp ResizeGrad(dY, shape, scales): the gradient of Resize's X, a tensor of `shape`.
class ResizeGrad final : public Kernel {
 public:
  ResizeGrad(const Node& n, int64_t) : attrs_(resize_attrs(n, 17)) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> data = read_ints(io.input(1));
    if (data.size() != io.input(0).rank())
      throw InputError("ResizeGrad dY " + dims_str(io.input(0).dims) + " and shape " + dims_str(data) + " differ in rank");
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = data;
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& dy = io.input(0);
    View& dx = io.output(0);
    const std::vector<float> scales = io.has_in(2) ? float_values(io.input(2)) : std::vector<float>{};
    const Plan p = plan(attrs_, dx.dims, dy.dims, scales);
    std::vector<double> acc(static_cast<size_t>(dx.numel()), 0.0);
    if (attrs_.mode == ResizeAttrs::Mode::kCubic) spread_cubic(p, dy, dx.dims, acc);
    else spread_linear(p, dy, dx.dims, acc);
    dispatch(FloatTypes{}, dy.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* out = dx.as<T>();
      for (size_t k = 0; k < acc.size(); ++k) out[k] = convert<T>(acc[k]);
    });
  }

 private:
  ResizeAttrs attrs_;
};

}  // namespace

const std::vector<OpEntry>& resize_ops() {
  static const std::vector<OpEntry> ops = {{"Resize", make_kernel<Resize>, FloatTypes::mask(), {}}};
  return ops;
}

const std::vector<OpEntry>& grad_resize_ops() {
  static const std::vector<OpEntry> ops = {{"ResizeGrad", make_kernel<ResizeGrad>, FloatTypes::mask(), {1, 2}}};
  return ops;
}

}  // namespace amp::cpu
