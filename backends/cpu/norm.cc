// BatchNormalization (opset 15: inference, and training mode with batch statistics and running
// stats outputs), LayerNormalization (with its Mean / InvStdDev outputs), InstanceNormalization and
// MeanVarianceNormalization. Statistics are
// computed in fp32 (fp64 for double inputs) in two passes, whatever the storage type: fp16 sums
// and variances overflow and lose the small differences normalization is about.
#include <cmath>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/row_sums.h"

namespace amp::cpu {
namespace {

template <class C>
std::vector<C> values_as(const View& v) {
  std::vector<C> out(static_cast<size_t>(v.numel()));
  dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<C>(load(v.as<T>()[i]));
  });
  return out;
}

template <class C>
void store_as(const std::vector<C>& values, View& v) {
  dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < values.size(); ++i) v.as<T>()[i] = store<T>(static_cast<compute_t<T>>(values[i]));
  });
}

class BatchNormalization final : public Kernel {
 public:
  BatchNormalization(const Node& n, int64_t opset)
      : epsilon_(n.attr_float("epsilon", 1e-5f)),
        momentum_(n.attr_float("momentum", 0.9f)),
        training_(n.attr_int("training_mode", 0) != 0) {
    if (opset < 14 && n.outputs().size() > 1)
      throw InputError("BatchNormalization in training mode before opset 14 is not supported");
  }

  size_t infer(KernelIO& io) const override {
    if ((io.has_out(1) || io.has_out(2)) && !training_) throw InputError("running statistics outputs need training_mode=1");
    infer_outputs(io);
    return 0;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const int64_t n = x.dims[0], channels = x.dims[1], size = product(x.dims, 2);
      const std::vector<C> scale = values_as<C>(io.input(1)), bias = values_as<C>(io.input(2));
      std::vector<C> mean = values_as<C>(io.input(3)), var = values_as<C>(io.input(4));
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      if (training_) {
        std::vector<C> batch_mean(channels), batch_var(channels);
        parallel_for(channels, ctx.threads, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            // fp64 sums: a channel's N*H*W terms (25088 for 32 MNIST images) summed in fp32 one by
            // one lose ~1e-5 of the mean, which training amplifies step after step.
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += row_sum(in + (i * channels + c) * size, size);
            const double m = sum / static_cast<double>(n * size);
            double sq = 0;
            for (int64_t i = 0; i < n; ++i) sq += row_sum_sq_dev(in + (i * channels + c) * size, size, m);
            batch_mean[c] = static_cast<C>(m);
            batch_var[c] = static_cast<C>(sq / static_cast<double>(n * size));
          }
        });
        const C mom = static_cast<C>(momentum_);
        std::vector<C> running_mean(channels), running_var(channels);
        for (int64_t c = 0; c < channels; ++c) {
          running_mean[c] = mean[c] * mom + batch_mean[c] * (C(1) - mom);
          running_var[c] = var[c] * mom + batch_var[c] * (C(1) - mom);
        }
        if (io.has_out(1)) store_as(running_mean, io.output(1));
        if (io.has_out(2)) store_as(running_var, io.output(2));
        mean = batch_mean;
        var = batch_var;
      }
      parallel_for(n * channels, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(size, 1)),
                   [&](int64_t p0, int64_t p1) {
                     for (int64_t p = p0; p < p1; ++p) {
                       const int64_t c = p % channels;
                       const C inv = C(1) / std::sqrt(var[c] + static_cast<C>(epsilon_));
                       store_rows<T>(out + p * size, size, [&](int64_t j) {
                         return static_cast<compute_t<T>>((load(in[p * size + j]) - mean[c]) * inv * scale[c] + bias[c]);
                       });
                     }
                   });
    });
  }

 private:
  float epsilon_, momentum_;
  bool training_;
};

class LayerNormalization final : public Kernel {
 public:
  LayerNormalization(const Node& n, int64_t)
      : axis_(n.attr_int("axis", -1)), epsilon_(n.attr_float("epsilon", 1e-5f)) {}


  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t rows = product(x.dims, 0, axis), d = product(x.dims, axis);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* in = x.as<T>();
      const T* scale = io.input(1).as<T>();
      const T* bias = io.has_in(2) ? io.input(2).as<T>() : nullptr;
      T* out = io.output(0).as<T>();
      std::vector<C> means(rows), invs(rows);
      parallel_for(rows, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(d, 1)),
                   [&](int64_t r0, int64_t r1) {
                     for (int64_t r = r0; r < r1; ++r) {
                       const T* row = in + r * d;
                       C sum = 0;
                       for (int64_t i = 0; i < d; ++i) sum += load(row[i]);
                       const C mean = sum / static_cast<C>(d);
                       C sq = 0;
                       for (int64_t i = 0; i < d; ++i) {
                         const C dev = load(row[i]) - mean;
                         sq += dev * dev;
                       }
                       const C inv = C(1) / std::sqrt(sq / static_cast<C>(d) + static_cast<C>(epsilon_));
                       for (int64_t i = 0; i < d; ++i) {
                         C y = (load(row[i]) - mean) * inv * static_cast<C>(load(scale[i]));
                         if (bias) y += static_cast<C>(load(bias[i]));
                         out[r * d + i] = store<T>(static_cast<compute_t<T>>(y));
                       }
                       means[r] = mean;
                       invs[r] = inv;
                     }
                   });
      if (io.has_out(1)) store_as(means, io.output(1));
      if (io.has_out(2)) store_as(invs, io.output(2));
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

// InstanceNormalization: y = scale[c] (x - mean) / sqrt(var + epsilon) + B[c], with the mean and
// (biased) variance of each (n, c) plane over the spatial dims, summed in fp64.
class InstanceNormalization final : public Kernel {
 public:
  InstanceNormalization(const Node& n, int64_t) : epsilon_(n.attr_float("epsilon", 1e-5f)) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const int64_t channels = x.dims[1], planes = x.dims[0] * channels, size = product(x.dims, 2);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const std::vector<C> scale = values_as<C>(io.input(1)), bias = values_as<C>(io.input(2));
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(planes, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(size, 1)),
                   [&](int64_t p0, int64_t p1) {
                     for (int64_t p = p0; p < p1; ++p) {
                       const T* plane = in + p * size;
                       const double mean = row_sum(plane, size) / static_cast<double>(size);
                       const double var = row_sum_sq_dev(plane, size, mean) / static_cast<double>(size);
                       const int64_t c = p % channels;
                       const C inv = static_cast<C>(1.0 / std::sqrt(var + static_cast<double>(epsilon_)));
                       const C m = static_cast<C>(mean);
                       store_rows<T>(out + p * size, size, [&](int64_t j) {
                         return static_cast<compute_t<T>>((load(plane[j]) - m) * inv * scale[c] + bias[c]);
                       });
                     }
                   });
    });
  }

 private:
  float epsilon_;
};

// MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]),
// as ONNX's function body defines it (the epsilon added to the deviation, not the variance).
// Statistics in fp64, two passes; any set of axes, one index walk per pass.
class MeanVarianceNormalization final : public Kernel {
 public:
  MeanVarianceNormalization(const Node& n, int64_t) : axes_(n.attr_ints("axes", {0, 2, 3})) {}

  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t a : axes_) {
      if (a < -rank || a >= rank)
        throw InputError("MeanVarianceNormalization: axis " + std::to_string(a) + " is out of range for " + dims_str(x.dims));
      reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
    }
    // Each element's group: its index over the kept dims.
    std::vector<int64_t> stride(static_cast<size_t>(rank), 0);
    int64_t groups = 1;
    for (int64_t d = rank; d-- > 0;)
      if (!reduced[static_cast<size_t>(d)]) {
        stride[static_cast<size_t>(d)] = groups;
        groups *= x.dims[static_cast<size_t>(d)];
      }
    const int64_t total = x.numel(), count = groups > 0 ? total / groups : 0;
    auto walk = [&](auto visit) {
      std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
      int64_t g = 0;
      for (int64_t e = 0; e < total; ++e) {
        visit(g, e);
        for (int64_t d = rank; d-- > 0;) {
          const size_t k = static_cast<size_t>(d);
          g += stride[k];
          if (++idx[k] < x.dims[k]) break;
          g -= stride[k] * x.dims[k];
          idx[k] = 0;
        }
      }
    };
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      std::vector<double> mean(static_cast<size_t>(groups), 0.0), dev(static_cast<size_t>(groups), 0.0);
      walk([&](int64_t g, int64_t e) { mean[static_cast<size_t>(g)] += static_cast<double>(load(in[e])); });
      for (double& m : mean) m /= static_cast<double>(count);
      walk([&](int64_t g, int64_t e) {
        const double d = static_cast<double>(load(in[e])) - mean[static_cast<size_t>(g)];
        dev[static_cast<size_t>(g)] += d * d;
      });
      for (double& v : dev) v = std::sqrt(v / static_cast<double>(count)) + 1e-9;
      walk([&](int64_t g, int64_t e) {
        const size_t k = static_cast<size_t>(g);
        out[e] = store<T>(static_cast<compute_t<T>>((static_cast<double>(load(in[e])) - mean[k]) / dev[k]));
      });
    });
  }

 private:
  std::vector<int64_t> axes_;
};

// LRN (AlexNet, GoogLeNet, ZFNet from Caffe): y = x / (bias + alpha / size * sum of x^2 over the
// channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2))^beta, in the compute type (fp32 for
// 16-bit tensors), one rounding on store, as ONNX's reference and torch's local_response_norm do.
class Lrn final : public Kernel {
 public:
  Lrn(const Node& n, int64_t)
      : alpha_(n.attr_float("alpha", 1e-4f)), beta_(n.attr_float("beta", 0.75f)), bias_(n.attr_float("bias", 1.0f)),
        size_(n.attr_int("size", 0)) {
    if (size_ <= 0) throw InputError("node " + n.label() + ": LRN needs a positive 'size'");
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    if (x.rank() < 2) throw InputError("LRN: the input must be [N, C, ...], got " + dims_str(x.dims));
    const int64_t batches = x.dims[0], channels = x.dims[1], inner = product(x.dims, 2);
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const C scale = static_cast<C>(alpha_) / static_cast<C>(size_);
      parallel_for(batches * channels, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner * size_, 1)),
                   [&](int64_t r0, int64_t r1) {
                     for (int64_t r = r0; r < r1; ++r) {
                       const int64_t n = r / channels, c = r % channels;
                       const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min(channels - 1, c + after);
                       for (int64_t i = 0; i < inner; ++i) {
                         C sum = 0;
                         for (int64_t k = lo; k <= hi; ++k) {
                           const C v = load(in[(n * channels + k) * inner + i]);
                           sum += v * v;
                         }
                         const C base = static_cast<C>(bias_) + scale * sum;
                         out[r * inner + i] = store<T>(load(in[r * inner + i]) / std::pow(base, static_cast<C>(beta_)));
                       }
                     }
                   });
    });
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
};

}  // namespace

const std::vector<OpEntry>& norm_ops() {
  static const std::vector<OpEntry> ops = {
      {"BatchNormalization", make_kernel<BatchNormalization>, FloatTypes::mask(), {}},
      {"LayerNormalization", make_kernel<LayerNormalization>, FloatTypes::mask(), {}},
      {"InstanceNormalization", make_kernel<InstanceNormalization>, FloatTypes::mask(), {}},
      {"MeanVarianceNormalization", make_kernel<MeanVarianceNormalization>, FloatTypes::mask(), {}},
      {"LRN", make_kernel<Lrn>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
