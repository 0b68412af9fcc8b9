// MaxPool (with optional Indices), AveragePool, GlobalAveragePool and GlobalMaxPool over 1 to 3 spatial dims.
// Each (image, channel) plane is independent, so planes are spread over the cores. Averages are
// summed in fp32 (fp64 for double) and rounded once.
#include <algorithm>
#include <limits>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/pool_taps.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

Window pool_window(const WindowAttrs& a, const View& x) {
  if (x.rank() < 3 || x.rank() > 5) throw InputError("pooling supports 1 to 3 spatial dims, X is " + dims_str(x.dims));
  return make_window(a, std::vector<int64_t>(x.dims.begin() + 2, x.dims.end()), {});
}

class MaxPool final : public Kernel {
 public:
  MaxPool(const Node& n, int64_t) : attrs_(n), column_major_(n.attr_int("storage_order", 0) != 0) {}
  size_t infer(KernelIO& io) const override {
    pool_window(attrs_, io.input(0));
    infer_outputs(io);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const Window3 w(pool_window(attrs_, x));
    int64_t* indices = io.has_out(1) ? io.output(1).as<int64_t>() : nullptr;
    dispatch(TypeList<float, f16, bf16, double, int8_t, uint8_t>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const int64_t planes = x.dims[0] * x.dims[1];
      const WindowTaps taps(w);
      const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                            : std::numeric_limits<C>::lowest();
      // Without Indices only the maximum matters: max selects (no branch on the data) with any NaN
      // noted on the side, so a NaN anywhere in the window wins, as in the Indices loop.
      auto plain_max = [](C v, C best) { return v > best ? v : best; };
      // 1-D and 2-D windows without dilation or Indices: per output row, the max down the window's
      // input rows first (whole rows: the loop vectorises), then across each window of that row.
      constexpr int64_t kRow = 2048;
      if (!indices && w.k[0] == 1 && w.in[0] == 1 && w.d[1] == 1 && w.d[2] == 1 && w.in[2] <= kRow &&
          w.out[2] <= kRow) {
        const InteriorRange interior = interior_of(taps.dim[2], w.k[2]);
        parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
          C row[kRow], best[kRow];
          for (int64_t p = p0; p < p1; ++p) {
            const T* plane = in + p * w.in_size();
            T* o = out + p * w.out_size();
            for (const Tap& ty : taps.dim[1]) {
              std::fill(row, row + w.in[2], lowest);
              for (int64_t j = ty.lo; j < ty.hi; ++j) {
                const T* src = plane + (ty.origin + j) * w.in[2];
                for (int64_t i = 0; i < w.in[2]; ++i) {
                  const C v = load(src[i]);
                  row[i] = (v > row[i]) | (v != v) ? v : row[i];
                }
              }
              // Outputs whose whole window lies inside the row: tap by tap across them (the loop
              // vectorises); the others, at the borders, window by window.
              const int64_t s2 = w.s[2];
              C* b = best + interior.begin;
              for (int64_t i = 0; i < interior.size(); ++i) b[i] = row[interior.origin + i * s2];
              for (int64_t l = 1; l < w.k[2]; ++l) {
                const C* r = row + interior.origin + l;
                for (int64_t i = 0; i < interior.size(); ++i) {
                  const C v = r[i * s2];
                  b[i] = (v > b[i]) | (v != v) ? v : b[i];
                }
              }
              for (int64_t ox = interior.begin; ox < interior.end; ++ox) o[ox] = store<T>(best[ox]);
              auto border = [&](int64_t ox) {
                const Tap& tx = taps.dim[2][static_cast<size_t>(ox)];
                const C* r = row + tx.origin;
                C m = lowest;
                bool nan = false;
                for (int64_t l = tx.lo; l < tx.hi; ++l) {
                  m = plain_max(r[l], m);
                  nan |= r[l] != r[l];
                }
                if constexpr (std::is_floating_point_v<C>)
                  if (nan) m = std::numeric_limits<C>::quiet_NaN();
                o[ox] = store<T>(m);
              };
              for (int64_t ox = 0; ox < interior.begin; ++ox) border(ox);
              for (int64_t ox = interior.end; ox < w.out[2]; ++ox) border(ox);
              o += w.out[2];
            }
          }
        });
        return;
      }
      parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* plane = in + p * w.in_size();
          for_each_output(taps, [&](int64_t o, const Tap& tz, const Tap& ty, const Tap& tx) {
            C best = lowest;
            if (indices) {
              int64_t at = window_argmax(plane, w, tz, ty, tx, &best);
              if (column_major_ && at >= 0) {  // storage_order 1: the offset as if the plane were column-major
                const int64_t xx = at % w.in[2], y = at / w.in[2] % w.in[1], z = at / (w.in[2] * w.in[1]);
                at = z + w.in[0] * (y + w.in[1] * xx);
              }
              indices[p * w.out_size() + o] = p * w.in_size() + at;
            } else {
              bool nan = false;
              for (int64_t i = tz.lo; i < tz.hi; ++i)
                for (int64_t j = ty.lo; j < ty.hi; ++j) {
                  const T* row = plane + ((tz.origin + i * w.d[0]) * w.in[1] + ty.origin + j * w.d[1]) * w.in[2];
                  for (int64_t l = tx.lo; l < tx.hi; ++l) {
                    const C v = load(row[tx.origin + l * w.d[2]]);
                    best = plain_max(v, best);
                    nan |= v != v;
                  }
                }
              if constexpr (std::is_floating_point_v<C>)
                if (nan) best = std::numeric_limits<C>::quiet_NaN();
            }
            out[p * w.out_size() + o] = store<T>(best);
          });
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
  bool column_major_;
};

class AveragePool final : public Kernel {
 public:
  AveragePool(const Node& n, int64_t) : attrs_(n), count_pad_(n.attr_int("count_include_pad", 0) != 0) {}
  size_t infer(KernelIO& io) const override {
    if (!attrs_.dilations.empty())
      for (int64_t d : attrs_.dilations)
        if (d != 1) throw InputError("AveragePool dilations are not supported");
    pool_window(attrs_, io.input(0));
    infer_outputs(io);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const Window3 w(pool_window(attrs_, x));
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const WindowTaps taps(w);
      parallel_for(x.dims[0] * x.dims[1], ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* plane = in + p * w.in_size();
          for_each_output(taps, [&](int64_t o, const Tap& tz, const Tap& ty, const Tap& tx) {
            C sum = 0;
            for (int64_t z = tz.origin + tz.lo; z < tz.origin + tz.hi; ++z)
              for (int64_t y = ty.origin + ty.lo; y < ty.origin + ty.hi; ++y) {
                const T* row = plane + (z * w.in[1] + y) * w.in[2];
                for (int64_t xx = tx.origin + tx.lo; xx < tx.origin + tx.hi; ++xx) sum += load(row[xx]);
              }
            const int64_t valid = (tz.hi - tz.lo) * (ty.hi - ty.lo) * (tx.hi - tx.lo);
            // With count_include_pad the divisor counts the pads too, but not what lies beyond them.
            const int64_t padded = tz.padded * ty.padded * tx.padded;
            const int64_t count = count_pad_ ? padded : valid;
            out[p * w.out_size() + o] = store<T>(count > 0 ? sum / static_cast<C>(count) : C(0));
          });
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
  bool count_pad_;
};

// GlobalAveragePool and GlobalMaxPool: one value per (n, c) plane. The max lets NaN win, as
// ReduceMax and torch.amax do.
template <bool kMax>
class GlobalPool final : public Kernel {
 public:
  GlobalPool(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const int64_t planes = x.dims[0] * x.dims[1], size = product(x.dims, 2);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(planes, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(size, 1)),
                   [&](int64_t p0, int64_t p1) {
                     for (int64_t p = p0; p < p1; ++p) {
                       if constexpr (kMax) {
                         C m = -std::numeric_limits<C>::infinity();
                         for (int64_t i = 0; i < size; ++i) {
                           const C v = load(in[p * size + i]);
                           if (v != v || v > m) m = v;
                           if (m != m) break;
                         }
                         out[p] = store<T>(m);
                       } else {
                         C sum = 0;
                         for (int64_t i = 0; i < size; ++i) sum += load(in[p * size + i]);
                         out[p] = store<T>(sum / static_cast<C>(size));
                       }
                     }
                   });
    });
  }
};

}  // namespace

const std::vector<OpEntry>& pool_ops() {
  static const std::vector<OpEntry> ops = {
      {"MaxPool", make_kernel<MaxPool>, TypeList<float, f16, bf16, double, int8_t, uint8_t>::mask(), {}},
      {"AveragePool", make_kernel<AveragePool>, FloatTypes::mask(), {}},
      {"GlobalAveragePool", make_kernel<GlobalPool<false>>, FloatTypes::mask(), {}},
      {"GlobalMaxPool", make_kernel<GlobalPool<true>>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
