// MaxPoolGrad and AveragePoolGrad over 1 to 3 spatial dims. MaxPoolGrad finds each window's
// arg-max again from X with the forward kernel's rule (the first maximum, NaN wins) and adds dY
// there; AveragePoolGrad spreads dY / count over the window. Each (image, channel) plane is
// independent, so planes are spread over the cores; sums are kept in fp32 (fp64 for double).
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/pool_taps.h"
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

class MaxPoolGrad final : public Kernel {
 public:
  MaxPoolGrad(const Node& n, int64_t) : attrs_(n) {}
  size_t infer(KernelIO& io) const override {
    infer_pool_grad(io, attrs_);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const Window3 w = infer_pool_grad(io, attrs_);
    const WindowTaps taps(w);
    // 1-D and 2-D windows: per output row, the arg-max of the windows that lie wholly inside the
    // row found tap by tap across them (the loop vectorises), the border windows one by one; then
    // dY is added in output order, so every sum is the one the plain loop makes.
    constexpr int64_t kRow = 2048;
    if (w.k[0] == 1 && w.in[0] == 1 && w.out[2] <= kRow && w.in_size() < (int64_t{1} << 31)) {
      const InteriorRange interior = interior_of(taps.dim[2], w.k[2]);
      for_each_plane(io, w, ctx, [&](const auto* dy, const auto* plane, auto* acc) {
        using C = std::remove_pointer_t<decltype(acc)>;
        C best[kRow];
        int32_t arg[kRow];
        const int64_t s2 = w.s[2], d2 = w.d[2], d1 = w.d[1];
        for (int64_t oy = 0; oy < w.out[1]; ++oy) {
          const Tap& ty = taps.dim[1][static_cast<size_t>(oy)];
          const Tap& tz = taps.dim[0][0];
          for (int64_t j = ty.lo; j < ty.hi; ++j) {
            const int64_t row = (ty.origin + j * d1) * w.in[2] + interior.origin;
            for (int64_t l = 0; l < w.k[2]; ++l) {
              const auto* src = plane + row + l * d2;
              const int32_t at0 = static_cast<int32_t>(row + l * d2);
              C* b = best + interior.begin;
              int32_t* a = arg + interior.begin;
              if (j == ty.lo && l == 0) {
                for (int64_t i = 0; i < interior.size(); ++i) {
                  b[i] = load(src[i * s2]);
                  a[i] = at0 + static_cast<int32_t>(i * s2);
                }
                continue;
              }
              for (int64_t i = 0; i < interior.size(); ++i) {
                const C v = load(src[i * s2]);
                const bool take = (v > b[i]) | (v != v);
                b[i] = take ? v : b[i];
                a[i] = take ? at0 + static_cast<int32_t>(i * s2) : a[i];
              }
            }
          }
          for (int64_t ox = 0; ox < w.out[2]; ++ox) {
            int64_t at;
            if (ox >= interior.begin && ox < interior.end && ty.hi > ty.lo) {
              at = arg[ox];
            } else {
              C b;
              at = window_argmax(plane, w, tz, ty, taps.dim[2][static_cast<size_t>(ox)], &b);
            }
            if (at >= 0) acc[at] += load(dy[oy * w.out[2] + ox]);
          }
        }
      });
      return;
    }
    for_each_plane(io, w, ctx, [&](const auto* dy, const auto* plane, auto* acc) {
      using C = std::remove_pointer_t<decltype(acc)>;
      for_each_output(taps, [&](int64_t o, const Tap& tz, const Tap& ty, const Tap& tx) {
        C best;
        const int64_t arg = window_argmax(plane, w, tz, ty, tx, &best);
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
    const WindowTaps taps(w);
    for_each_plane(io, w, ctx, [&](const auto* dy, const auto*, auto* acc) {
      using C = std::remove_pointer_t<decltype(acc)>;
      for_each_output(taps, [&](int64_t o, const Tap& tz, const Tap& ty, const Tap& tx) {
        // The count the forward kernel divided by: with count_include_pad the pads count too.
        const int64_t valid = (tz.hi - tz.lo) * (ty.hi - ty.lo) * (tx.hi - tx.lo);
        const int64_t count = count_pad_ ? tz.padded * ty.padded * tx.padded : valid;
        if (count == 0) return;
        const C share = load(dy[o]) / static_cast<C>(count);
        for (int64_t z = tz.origin + tz.lo; z < tz.origin + tz.hi; ++z)
          for (int64_t y = ty.origin + ty.lo; y < ty.origin + ty.hi; ++y) {
            C* row = acc + (z * w.in[1] + y) * w.in[2];
            for (int64_t xx = tx.origin + tx.lo; xx < tx.origin + tx.hi; ++xx) row[xx] += share;
          }
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
