// BatchNormalizationGrad (training mode) and LayerNormalizationGrad. Both recompute the statistics
// from X, then with x̂ = (x - mean) / sqrt(var + eps) over the normalized elements (M of them):
//   dBias = Σ dY,  dScale = Σ dY x̂,  dX = scale / sqrt(var + eps) · (dY - mean(dY') - x̂ mean(dY' x̂))
// where dY' = dY (BatchNorm, scale per channel) or dY·scale (LayerNorm, scale per element).
// Statistics and sums are kept in fp64: they sum many terms of similar size whose differences matter.
#include <cmath>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/row_sums.h"

namespace amp::cpu {
namespace {

template <class T>
std::vector<double> as_doubles(const View& v) {
  std::vector<double> out(static_cast<size_t>(v.numel()));
  const T* p = v.as<T>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(load(p[i]));
  return out;
}

template <class T>
void store_doubles(const std::vector<double>& v, View& out) {
  T* p = out.as<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(v[i]);
}

// dScale and dB (outputs 1 and 2, when present) are shaped and typed like the scale.
void type_parameter_gradients(KernelIO& io, const View& scale) {
  for (size_t i = 1; i < 3; ++i)
    if (io.has_out(i)) {
      io.output(i).dtype = scale.dtype;
      io.output(i).dims = scale.dims;
    }
}

class BatchNormalizationGrad final : public Kernel {
 public:
  BatchNormalizationGrad(const Node& n, int64_t) : epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  size_t infer(KernelIO& io) const override {
    const View &dy = io.input(0), &x = io.input(1), &scale = io.input(2);
    if (x.rank() < 2 || dy.dims != x.dims || dy.dtype != x.dtype)
      throw InputError("BatchNormalizationGrad needs dY and X of one [N,C,...] shape and type");
    if (scale.numel() != x.dims[1]) throw InputError("scale must have C elements");
    io.output(0).dtype = x.dtype;
    io.output(0).dims = x.dims;
    type_parameter_gradients(io, scale);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &dyv = io.input(0), &xv = io.input(1), &scale_v = io.input(2);
    const int64_t n = xv.dims[0], channels = xv.dims[1], size = product(xv.dims, 2), m = n * size;
    std::vector<double> scale, dscale(static_cast<size_t>(channels)), dbias(static_cast<size_t>(channels));
    dispatch(FloatTypes{}, scale_v.dtype, [&](auto tag) { scale = as_doubles<typename decltype(tag)::type>(scale_v); });
    dispatch(FloatTypes{}, xv.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = xv.as<T>();
      const T* dy = dyv.as<T>();
      T* dx = io.output(0).as<T>();
      parallel_for(channels, ctx.threads, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          auto at = [&](int64_t i, int64_t j) { return (i * channels + c) * size + j; };
          double sum = 0, sq = 0;
          for (int64_t i = 0; i < n; ++i) sum += row_sum(x + at(i, 0), size);
          const double mean = sum / static_cast<double>(m);
          for (int64_t i = 0; i < n; ++i) sq += row_sum_sq_dev(x + at(i, 0), size, mean);
          const double inv = 1.0 / std::sqrt(sq / static_cast<double>(m) + static_cast<double>(epsilon_));
          double db = 0, ds = 0;
          for (int64_t i = 0; i < n; ++i) {
            db += row_sum(dy + at(i, 0), size);
            ds += row_sum_prod_dev(dy + at(i, 0), x + at(i, 0), size, mean);
          }
          ds *= inv;
          dbias[static_cast<size_t>(c)] = db;
          dscale[static_cast<size_t>(c)] = ds;
          const double k = scale[static_cast<size_t>(c)] * inv / static_cast<double>(m);
          for (int64_t i = 0; i < n; ++i)
            store_rows<T>(dx + at(i, 0), size, [&](int64_t j) {
              const double xhat = (load(x[at(i, j)]) - mean) * inv;
              return k * (static_cast<double>(m) * load(dy[at(i, j)]) - db - xhat * ds);
            });
        }
      });
    });
    dispatch(FloatTypes{}, scale_v.dtype, [&](auto tag) {
      using S = typename decltype(tag)::type;
      if (io.has_out(1)) store_doubles<S>(dscale, io.output(1));
      if (io.has_out(2)) store_doubles<S>(dbias, io.output(2));
    });
  }

 private:
  float epsilon_;
};

class LayerNormalizationGrad final : public Kernel {
 public:
  LayerNormalizationGrad(const Node& n, int64_t)
      : axis_(n.attr_int("axis", -1)), epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  size_t infer(KernelIO& io) const override {
    const View &dy = io.input(0), &x = io.input(1), &scale = io.input(2);
    if (dy.dims != x.dims || dy.dtype != x.dtype || scale.dtype != x.dtype)
      throw InputError("LayerNormalizationGrad needs dY, X and Scale of one type, dY shaped like X");
    const int64_t axis = normalize_axis(axis_, static_cast<int64_t>(x.rank()));
    if (scale.numel() != product(x.dims, static_cast<size_t>(axis)))
      throw InputError("Scale " + dims_str(scale.dims) + " does not cover X " + dims_str(x.dims) + " from axis " +
                       std::to_string(axis));
    io.output(0).dtype = x.dtype;
    io.output(0).dims = x.dims;
    type_parameter_gradients(io, scale);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &dyv = io.input(0), &xv = io.input(1);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(xv.rank())));
    const int64_t rows = product(xv.dims, 0, axis), cols = product(xv.dims, axis);
    dispatch(FloatTypes{}, xv.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::vector<double> scale = as_doubles<T>(io.input(2));
      const T* x = xv.as<T>();
      const T* dy = dyv.as<T>();
      T* dx = io.output(0).as<T>();
      // Partial sums of dScale and dBias per block of rows, added up in block order after: the
      // blocks run in parallel, and a fixed block count keeps the result independent of cores.
      const int64_t blocks = std::min<int64_t>(16, std::max<int64_t>(rows, 1));
      std::vector<std::vector<double>> ds(static_cast<size_t>(blocks), std::vector<double>(static_cast<size_t>(cols)));
      std::vector<std::vector<double>> db(static_cast<size_t>(blocks), std::vector<double>(static_cast<size_t>(cols)));
      const int64_t chunk = (rows + blocks - 1) / blocks;
      parallel_for(blocks, ctx.threads, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          std::vector<double> xhat(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
          auto& my_ds = ds[static_cast<size_t>(t)];
          auto& my_db = db[static_cast<size_t>(t)];
          for (int64_t r = t * chunk; r < std::min(rows, (t + 1) * chunk); ++r) {
            const T* xr = x + r * cols;
            const T* dyr = dy + r * cols;
            // The row's sums through row_sums.h (vectorised, in an order fixed by the build); the
            // element loops between them carry no sum and vectorise as they are.
            const double mean = row_sum(xr, cols) / static_cast<double>(cols);
            const double inv =
                1.0 / std::sqrt(row_sum_sq_dev(xr, cols, mean) / static_cast<double>(cols) + static_cast<double>(epsilon_));
            for (int64_t j = 0; j < cols; ++j) {
              const size_t k = static_cast<size_t>(j);
              xhat[k] = (load(xr[j]) - mean) * inv;
              const double d = load(dyr[j]);
              my_ds[k] += d * xhat[k];
              my_db[k] += d;
              g[k] = d * scale[k];
            }
            const double mean_g = row_sum(g.data(), cols) / static_cast<double>(cols);
            const double mean_gx = row_sum_prod_dev(g.data(), xhat.data(), cols, 0.0) / static_cast<double>(cols);
            for (int64_t j = 0; j < cols; ++j) {
              const size_t k = static_cast<size_t>(j);
              dx[r * cols + j] = convert<T>(inv * (g[k] - mean_g - xhat[k] * mean_gx));
            }
          }
        }
      });
      std::vector<double> dscale(static_cast<size_t>(cols)), dbias(static_cast<size_t>(cols));
      for (int64_t t = 0; t < blocks; ++t)
        for (size_t k = 0; k < dscale.size(); ++k) {
          dscale[k] += ds[static_cast<size_t>(t)][k];
          dbias[k] += db[static_cast<size_t>(t)][k];
        }
      if (io.has_out(1)) store_doubles<T>(dscale, io.output(1));
      if (io.has_out(2)) store_doubles<T>(dbias, io.output(2));
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

}  // namespace

const std::vector<OpEntry>& grad_norm_ops() {
  static const std::vector<OpEntry> ops = {
      {"BatchNormalizationGrad", make_kernel<BatchNormalizationGrad>, FloatTypes::mask(), {}},
      {"LayerNormalizationGrad", make_kernel<LayerNormalizationGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
