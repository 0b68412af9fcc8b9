// MaxPool (with optional Indices), AveragePool and GlobalAveragePool over 1 to 3 spatial dims.
// Each (image, channel) plane is independent, so planes are spread over the cores. Averages are
// summed in fp32 (fp64 for double) and rounded once.
#include <limits>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/window.h"

namespace amp::cpu {
namespace {

// The window padded out to 3 spatial dims (leading dims of extent 1).
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  explicit Window3(const Window& w) {
    const size_t r = w.in.size(), shift = 3 - r;
    for (size_t i = 0; i < 3; ++i) {
      const bool real = i >= shift;
      const size_t j = i - shift;
      in[i] = real ? w.in[j] : 1;
      out[i] = real ? w.out[j] : 1;
      k[i] = real ? w.kernel[j] : 1;
      s[i] = real ? w.strides[j] : 1;
      d[i] = real ? w.dilations[j] : 1;
      pb[i] = real ? w.pads_begin[j] : 0;
      pe[i] = real ? w.pads_end[j] : 0;
    }
  }
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

Window pool_window(const WindowAttrs& a, const View& x) {
  if (x.rank() < 3 || x.rank() > 5) throw InputError("pooling supports 1 to 3 spatial dims, X is " + dims_str(x.dims));
  return make_window(a, std::vector<int64_t>(x.dims.begin() + 2, x.dims.end()), {});
}

std::vector<int64_t> pooled_dims(const View& x, const Window& w) {
  std::vector<int64_t> dims = {x.dims[0], x.dims[1]};
  dims.insert(dims.end(), w.out.begin(), w.out.end());
  return dims;
}

// Calls f(out_index, window origin z, y, x) for each output position of one plane.
template <class F>
void for_each_output(const Window3& w, F&& f) {
  int64_t o = 0;
  for (int64_t oz = 0; oz < w.out[0]; ++oz)
    for (int64_t oy = 0; oy < w.out[1]; ++oy)
      for (int64_t ox = 0; ox < w.out[2]; ++ox)
        f(o++, oz * w.s[0] - w.pb[0], oy * w.s[1] - w.pb[1], ox * w.s[2] - w.pb[2]);
}

class MaxPool final : public Kernel {
 public:
  MaxPool(const Node& n, int64_t) : attrs_(n), column_major_(n.attr_int("storage_order", 0) != 0) {}
  size_t infer(KernelIO& io) const override {
    const Window w = pool_window(attrs_, io.input(0));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = pooled_dims(io.input(0), w);
    if (io.has_out(1)) {
      io.output(1).dtype = DType::kInt64;
      io.output(1).dims = io.output(0).dims;
    }
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
      parallel_for(planes, ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* plane = in + p * w.in_size();
          for_each_output(w, [&](int64_t o, int64_t z0, int64_t y0, int64_t x0) {
            C best = std::numeric_limits<C>::lowest();
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
                    arg = column_major_ ? z + w.in[0] * (y + w.in[1] * xx) : at;
                  }
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
    const Window w = pool_window(attrs_, io.input(0));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = pooled_dims(io.input(0), w);
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
      parallel_for(x.dims[0] * x.dims[1], ctx.threads, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* plane = in + p * w.in_size();
          for_each_output(w, [&](int64_t o, int64_t z0, int64_t y0, int64_t x0) {
            C sum = 0;
            int64_t valid = 0, padded = 0;
            for (int64_t z = z0; z < z0 + w.k[0]; ++z) {
              if (z < -w.pb[0] || z >= w.in[0] + w.pe[0]) continue;
              for (int64_t y = y0; y < y0 + w.k[1]; ++y) {
                if (y < -w.pb[1] || y >= w.in[1] + w.pe[1]) continue;
                for (int64_t xx = x0; xx < x0 + w.k[2]; ++xx) {
                  if (xx < -w.pb[2] || xx >= w.in[2] + w.pe[2]) continue;
                  ++padded;
                  if (z < 0 || z >= w.in[0] || y < 0 || y >= w.in[1] || xx < 0 || xx >= w.in[2]) continue;
                  ++valid;
                  sum += load(plane[(z * w.in[1] + y) * w.in[2] + xx]);
                }
              }
            }
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
  size_t infer(KernelIO& io) const override {
    const View& x = io.input(0);
    if (x.rank() < 3) throw InputError("GlobalAveragePool needs [N,C,...], X is " + dims_str(x.dims));
    io.output(0).dtype = x.dtype;
    io.output(0).dims = x.dims;
    std::fill(io.output(0).dims.begin() + 2, io.output(0).dims.end(), 1);
    return 0;
  }
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
