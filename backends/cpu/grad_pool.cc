// MaxPoolGrad and AveragePoolGrad over 1 to 3 spatial dims. MaxPoolGrad finds each window's
// arg-max again from X with the forward kernel's rule (the first maximum, NaN wins) and adds dY
// there; AveragePoolGrad spreads dY / count over the window. Each (image, channel) plane is
// independent, so planes are spread over the cores; sums are kept in fp32 (fp64 for double).
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

// Checks dY against the pooled shape of X; the output is shaped like X.
Window3 infer_pool_grad(KernelIO& io, const WindowAttrs& a) {
  const View &dy = io.input(0), &x = io.input(1);
  if (x.rank() < 3 || x.rank() > 5) throw InputError("pooling supports 1 to 3 spatial dims, X is " + dims_str(x.dims));
  if (dy.dtype != x.dtype) throw InputError("dY and X have different element types");
  const Window w = make_window(a, std::vector<int64_t>(x.dims.begin() + 2, x.dims.end()), {});
  std::vector<int64_t> pooled = {x.dims[0], x.dims[1]};
  pooled.insert(pooled.end(), w.out.begin(), w.out.end());
  if (dy.dims != pooled) throw InputError("dY " + dims_str(dy.dims) + " should be " + dims_str(pooled));
  io.output(0).dtype = x.dtype;
  io.output(0).dims = x.dims;
  return Window3(w);
}

// Runs f(plane index, dY plane, X plane, fp32 dX accumulator) per plane, then stores dX.
template <class F>
void for_each_plane(KernelIO& io, const Window3& w, const RunContext& ctx, F&& f) {
  const View& x = io.input(1);
  dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* dy = io.input(0).as<T>();
    const T* in = x.as<T>();
    T* dx = io.output(0).as<T>();
    parallel_for(x.dims[0] * x.dims[1], ctx.threads, 1, [&](int64_t p0, int64_t p1) {
      std::vector<C> acc(static_cast<size_t>(w.in_size()));
      for (int64_t p = p0; p < p1; ++p) {
        std::fill(acc.begin(), acc.end(), C(0));
        f(dy + p * w.out_size(), in + p * w.in_size(), acc.data());
        for (int64_t i = 0; i < w.in_size(); ++i) dx[p * w.in_size() + i] = store<T>(acc[static_cast<size_t>(i)]);
      }
    });
  });
}

template <class G>
void for_each_output(const Window3& w, G&& g) {
  int64_t o = 0;
  for (int64_t oz = 0; oz < w.out[0]; ++oz)
    for (int64_t oy = 0; oy < w.out[1]; ++oy)
      for (int64_t ox = 0; ox < w.out[2]; ++ox)
        g(o++, oz * w.s[0] - w.pb[0], oy * w.s[1] - w.pb[1], ox * w.s[2] - w.pb[2]);
}

class MaxPoolGrad final : public Kernel {
 public:
  MaxPoolGrad(const Node& n, int64_t) : attrs_(n) {}
  size_t infer(KernelIO& io) const override {
    infer_pool_grad(io, attrs_);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const Window3 w = infer_pool_grad(io, attrs_);
    for_each_plane(io, w, ctx, [&](const auto* dy, const auto* plane, auto* acc) {
      for_each_output(w, [&](int64_t o, int64_t z0, int64_t y0, int64_t x0) {
        using C = std::remove_pointer_t<decltype(acc)>;
        C best = 0;
        int64_t arg = -1;
        for (int64_t i = 0; i < w.k[0]; ++i) {
          const int64_t z = z0 + i * w.d[0];
          if (z < 0 || z >= w.in[0]) continue;
          for (int64_t j = 0; j < w.k[1]; ++j) {
            const int64_t y = y0 + j * w.d[1];
            if (y < 0 || y >= w.in[1]) continue;
            for (int64_t l = 0; l < w.k[2]; ++l) {
              const int64_t xx = x0 + l * w.d[2];
              if (xx < 0 || xx >= w.in[2]) continue;
              const int64_t at = (z * w.in[1] + y) * w.in[2] + xx;
              const C v = load(plane[at]);
              if (arg < 0 || v > best || v != v) {
                best = v;
                arg = at;
              }
            }
          }
        }
        if (arg >= 0) acc[arg] += load(dy[o]);
      });
    });
  }

 private:
  WindowAttrs attrs_;
};

class AveragePoolGrad final : public Kernel {
 public:
  AveragePoolGrad(const Node& n, int64_t) : attrs_(n), count_pad_(n.attr_int("count_include_pad", 0) != 0) {}
  size_t infer(KernelIO& io) const override {
    infer_pool_grad(io, attrs_);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const Window3 w = infer_pool_grad(io, attrs_);
    for_each_plane(io, w, ctx, [&](const auto* dy, const auto*, auto* acc) {
      using C = std::remove_pointer_t<decltype(acc)>;
      for_each_output(w, [&](int64_t o, int64_t z0, int64_t y0, int64_t x0) {
        // The same count the forward kernel divided by: padded positions count with count_include_pad.
        int64_t valid = 0, padded = 0;
        for (int64_t z = z0; z < z0 + w.k[0]; ++z)
          for (int64_t y = y0; y < y0 + w.k[1]; ++y)
            for (int64_t xx = x0; xx < x0 + w.k[2]; ++xx) {
              if (z < -w.pb[0] || z >= w.in[0] + w.pe[0] || y < -w.pb[1] || y >= w.in[1] + w.pe[1] ||
                  xx < -w.pb[2] || xx >= w.in[2] + w.pe[2])
                continue;
              ++padded;
              if (z >= 0 && z < w.in[0] && y >= 0 && y < w.in[1] && xx >= 0 && xx < w.in[2]) ++valid;
            }
        const int64_t count = count_pad_ ? padded : valid;
        if (count == 0) return;
        const C share = load(dy[o]) / static_cast<C>(count);
        for (int64_t z = std::max<int64_t>(z0, 0); z < std::min(z0 + w.k[0], w.in[0]); ++z)
          for (int64_t y = std::max<int64_t>(y0, 0); y < std::min(y0 + w.k[1], w.in[1]); ++y)
            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x0 + w.k[2], w.in[2]); ++xx)
              acc[(z * w.in[1] + y) * w.in[2] + xx] += share;
      });
    });
  }

 private:
  WindowAttrs attrs_;
  bool count_pad_;
};

}  // namespace

const std::vector<OpEntry>& grad_pool_ops() {
  static const std::vector<OpEntry> ops = {
      {"MaxPoolGrad", make_kernel<MaxPoolGrad>, FloatTypes::mask(), {}},
      {"AveragePoolGrad", make_kernel<AveragePoolGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
