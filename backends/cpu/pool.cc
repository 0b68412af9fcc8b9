// MaxPool (with optional Indices), AveragePool and GlobalAveragePool over 1 to 3 spatial dims.
// Each (image, channel) plane is independent, so planes are spread over the cores. Averages are
// summed in fp32 (fp64 for double) and rounded once.
#include <algorithm>
#include <limits>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

Window pool_window(const WindowAttrs& a, const View& x) {
  if (x.rank() < 3 || x.rank() > 5) throw InputError("pooling supports 1 to 3 spatial dims, X is " + dims_str(x.dims));
  return make_window(a, std::vector<int64_t>(x.dims.begin() + 2, x.dims.end()), {});
}

// One output coordinate of one dim: where its window starts in the input, and the kernel taps
// [lo, hi) that land inside the input (and, for count_include_pad, inside input plus pads). Made
// once per dim and output coordinate, so the loops below have neither bounds checks nor divisions.
struct Tap {
  int64_t origin, lo, hi, padded;
};

std::vector<Tap> taps_of(const Window3& w, int dim) {
  const int64_t k = w.k[dim], d = w.d[dim], extent = w.in[dim];
  auto first_at_or_after = [&](int64_t origin, int64_t limit) {  // first tap t with origin + t*d >= limit
    return origin >= limit ? 0 : (limit - origin + d - 1) / d;
  };
  std::vector<Tap> taps;
  for (int64_t o = 0; o < w.out[dim]; ++o) {
    const int64_t origin = o * w.s[dim] - w.pb[dim];
    const int64_t hi = std::min(k, first_at_or_after(origin, extent));
    const int64_t lo = std::min(hi, first_at_or_after(origin, 0));
    const int64_t padded_hi = std::min(k, first_at_or_after(origin, extent + w.pe[dim]));
    const int64_t padded_lo = std::min(padded_hi, first_at_or_after(origin, -w.pb[dim]));
    taps.push_back({origin, lo, hi, padded_hi - padded_lo});
  }
  return taps;
}

// Calls f(out_index, tap z, tap y, tap x) for each output position of one plane.
template <class F>
void for_each_output(const std::vector<Tap> (&taps)[3], F&& f) {
  int64_t o = 0;
  for (const Tap& z : taps[0])
    for (const Tap& y : taps[1])
      for (const Tap& x : taps[2]) f(o++, z, y, x);
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
      const std::vector<Tap> taps[3] = {taps_of(w, 0), taps_of(w, 1), taps_of(w, 2)};
      const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                            : std::numeric_limits<C>::lowest();
      // 1-D and 2-D windows without dilation or Indices: per output row, the max down the window's
      // input rows first (whole rows: the loop vectorises), then across each window of that row.
      // The same maximum, NaN included (a NaN anywhere in the window wins), as the loop below.
      constexpr int64_t kRow = 2048;
      if (!indices && w.k[0] == 1 && w.in[0] == 1 && w.d[1] == 1 && w.d[2] == 1 && w.in[2] <= kRow) {
        parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
          C row[kRow];
          for (int64_t p = p0; p < p1; ++p) {
            const T* plane = in + p * w.in_size();
            T* o = out + p * w.out_size();
            for (const Tap& ty : taps[1]) {
              std::fill(row, row + w.in[2], lowest);
              for (int64_t j = ty.lo; j < ty.hi; ++j) {
                const T* src = plane + (ty.origin + j) * w.in[2];
                for (int64_t i = 0; i < w.in[2]; ++i) {
                  const C v = load(src[i]);
                  row[i] = (v > row[i]) | (v != v) ? v : row[i];
                }
              }
              for (const Tap& tx : taps[2]) {
                C best = lowest;
                for (int64_t l = tx.lo; l < tx.hi; ++l) {
                  const C v = row[tx.origin + l];
                  best = (v > best) | (v != v) ? v : best;
                }
                *o++ = store<T>(best);
              }
            }
          }
        });
        return;
      }
      parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* plane = in + p * w.in_size();
          for_each_output(taps, [&](int64_t o, const Tap& tz, const Tap& ty, const Tap& tx) {
            C best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                          : std::numeric_limits<C>::lowest();
            int64_t arg = -1;
            if (!indices) {
              // Plain max: no index chain, and NaN noted on the side, keep the loop short.
              bool nan = false;
              for (int64_t i = tz.lo; i < tz.hi; ++i)
                for (int64_t j = ty.lo; j < ty.hi; ++j) {
                  const T* row = plane + ((tz.origin + i * w.d[0]) * w.in[1] + ty.origin + j * w.d[1]) * w.in[2];
                  for (int64_t l = tx.lo; l < tx.hi; ++l) {
                    const C v = load(row[tx.origin + l * w.d[2]]);
                    best = v > best ? v : best;
                    nan |= v != v;
                  }
                }
              if constexpr (std::is_floating_point_v<C>)
                if (nan) best = std::numeric_limits<C>::quiet_NaN();
            }
            for (int64_t i = tz.lo; indices && i < tz.hi; ++i) {
              const int64_t z = tz.origin + i * w.d[0];
              for (int64_t j = ty.lo; j < ty.hi; ++j) {
                const int64_t y = ty.origin + j * w.d[1];
                const T* row = plane + (z * w.in[1] + y) * w.in[2];
                for (int64_t l = tx.lo; l < tx.hi; ++l) {
                  const int64_t xx = tx.origin + l * w.d[2];
                  const C v = load(row[xx]);
                  // Selects rather than branches: on real data "is this the new max" is a coin flip.
                  const bool take = (arg < 0) | (v > best) | (v != v);
                  best = take ? v : best;
                  const int64_t at = column_major_ ? z + w.in[0] * (y + w.in[1] * xx) : (z * w.in[1] + y) * w.in[2] + xx;
                  arg = take ? at : arg;
                }
              }
            }
            out[p * w.out_size() + o] = store<T>(best);
            if (indices) indices[p * w.out_size() + o] = p * w.in_size() + arg;
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
      const std::vector<Tap> taps[3] = {taps_of(w, 0), taps_of(w, 1), taps_of(w, 2)};
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

class GlobalAveragePool final : public Kernel {
 public:
  GlobalAveragePool(const Node&, int64_t) {}
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
                       C sum = 0;
                       for (int64_t i = 0; i < size; ++i) sum += load(in[p * size + i]);
                       out[p] = store<T>(sum / static_cast<C>(size));
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
      {"GlobalAveragePool", make_kernel<GlobalAveragePool>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
