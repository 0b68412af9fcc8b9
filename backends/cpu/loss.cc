// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (opset 13), sharing the gather-and-reduce
// of -log p[n, label, d]: optional class weights, ignore_index (weight 0), reduction none / sum /
// mean, where mean divides by the summed weights when weights or ignore_index are present and by
// the element count otherwise (ONNX's reference). Computed in fp32 (fp64 for double).
#include <cmath>
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

struct LossAttrs {
  std::string reduction;
  bool has_ignore;
  int64_t ignore;
  explicit LossAttrs(const Node& n)
      : reduction(n.attr_string("reduction", "mean")),
        has_ignore(n.attr("ignore_index") != nullptr),
        ignore(n.attr_int("ignore_index", 0)) {
    if (reduction != "none" && reduction != "sum" && reduction != "mean")
      throw InputError("unknown reduction '" + reduction + "'");
  }
};

// logp(k): log p at element k of [N, C, D], in C-type; writes the loss output.
template <class T, class C, class LogP>
void reduce_nll(const KernelIO& io, const LossAttrs& a, const LogP& logp) {
  const View& x = io.input(0);
  const int64_t n = x.dims[0], classes = x.dims[1], d = product(x.dims, 2);
  const std::vector<int64_t> labels = read_ints(io.input(1));
  const T* weights = io.has_in(2) ? io.input(2).as<T>() : nullptr;
  T* out = io.output(0).as<T>();
  C total = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t label = labels[i * d + j];
      C loss = 0, w = 0;
      if (!(a.has_ignore && label == a.ignore)) {
        if (label < 0 || label >= classes)
          throw InputError("label " + std::to_string(label) + " is out of range for " + std::to_string(classes) + " classes");
        w = weights ? static_cast<C>(load(weights[label])) : C(1);
        loss = -logp((i * classes + label) * d + j) * w;
      }
      if (a.reduction == "none") out[i * d + j] = store<T>(static_cast<compute_t<T>>(loss));
      total += loss;
      weight_sum += w;
    }
  if (a.reduction == "sum") out[0] = store<T>(static_cast<compute_t<T>>(total));
  if (a.reduction == "mean") {
    const C denom = weights || a.has_ignore ? weight_sum : static_cast<C>(n * d);
    out[0] = store<T>(static_cast<compute_t<T>>(total / denom));
  }
}

template <class T>
using wide_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

class SoftmaxCrossEntropyLoss final : public Kernel {
 public:
  SoftmaxCrossEntropyLoss(const Node& n, int64_t) : attrs_(n) {}
  // Scratch: one log-sum-exp per (n, d), not log p for every class: a language model's scores are
  // tokens x vocabulary (GPT-2 at 2 x 1024 tokens: 393 MiB in fp32), and log p is only read at
  // the labels.
  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View& x = io.input(0);
    return static_cast<size_t>(x.dims[0] * product(x.dims, 2)) * (x.dtype == DType::kDouble ? 8 : 4);
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const int64_t n = x.dims[0], classes = x.dims[1], d = product(x.dims, 2);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = wide_t<T>;
      const T* in = x.as<T>();
      C* lse = static_cast<C*>(io.workspace);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t base = i * classes * d + j;
          C mx = -std::numeric_limits<C>::infinity();
          for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, static_cast<C>(load(in[base + c * d])));
          C sum = 0;
          for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<C>(load(in[base + c * d])) - mx);
          lse[i * d + j] = mx + std::log(sum);
        }
      auto logp = [&](int64_t k) { return static_cast<C>(load(in[k])) - lse[(k / (classes * d)) * d + k % d]; };
      if (io.has_out(1)) {
        T* lp = io.output(1).as<T>();
        for (int64_t k = 0; k < x.numel(); ++k) lp[k] = store<T>(static_cast<compute_t<T>>(logp(k)));
      }
      reduce_nll<T, C>(io, attrs_, logp);
    });
  }

 private:
  LossAttrs attrs_;
};

class NegativeLogLikelihoodLoss final : public Kernel {
 public:
  NegativeLogLikelihoodLoss(const Node& n, int64_t) : attrs_(n) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = wide_t<T>;
      const T* in = x.as<T>();
      reduce_nll<T, C>(io, attrs_, [&](int64_t k) { return static_cast<C>(load(in[k])); });
    });
  }

 private:
  LossAttrs attrs_;
};

}  // namespace

const std::vector<OpEntry>& loss_ops() {
  static const std::vector<OpEntry> ops = {
      {"SoftmaxCrossEntropyLoss", make_kernel<SoftmaxCrossEntropyLoss>, FloatTypes::mask(), {}},
      {"NegativeLogLikelihoodLoss", make_kernel<NegativeLogLikelihoodLoss>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
