// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad: for each [n, ·, d] the label's
// weight w (0 when ignored) times the loss gradient g — dLoss, dLoss / Σw for mean, or dLoss[n, d]
// for reduction none — multiplies softmax(scores) - onehot(label) (cross entropy) or -onehot(label)
// (NLL, whose input already is a log-probability). Softmax is recomputed in fp64.
#include <cmath>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class ClassificationLossGrad : public Kernel {
 public:
  ClassificationLossGrad(const Node& n, bool softmax)
      : softmax_(softmax),
        reduction_(n.attr_string("reduction", "mean")),
        has_ignore_(n.attr("ignore_index") != nullptr),
        ignore_(n.attr_int("ignore_index", 0)) {
    if (reduction_ != "none" && reduction_ != "sum" && reduction_ != "mean")
      throw InputError("unknown reduction '" + reduction_ + "'");
  }

  size_t infer(KernelIO& io) const override {
    const View &dloss = io.input(0), &x = io.input(1), &labels = io.input(2);
    if (x.rank() < 2) throw InputError("scores must be [N, C, ...], got " + dims_str(x.dims));
    std::vector<int64_t> per_item = x.dims;
    per_item.erase(per_item.begin() + 1);
    if (labels.dims != per_item) throw InputError("labels " + dims_str(labels.dims) + " do not match " + dims_str(x.dims));
    if (dloss.dtype != x.dtype) throw InputError("dLoss and the scores have different element types");
    if (reduction_ == "none" ? dloss.dims != per_item : dloss.numel() != 1)
      throw InputError("dLoss " + dims_str(dloss.dims) + " does not match reduction " + reduction_);
    if (io.has_in(3) && (io.input(3).numel() != x.dims[1] || io.input(3).dtype != x.dtype))
      throw InputError("weights must be C elements of the scores' type");
    io.output(0).dtype = x.dtype;
    io.output(0).dims = x.dims;
    return 0;
  }

  // Each row's scores are read into p before any of its gradient is written, and rows touch only
  // their own elements: the gradient may take the scores' buffer.
  int overwrites_input() const override { return 1; }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& xv = io.input(1);
    const int64_t n = xv.dims[0], classes = xv.dims[1], d = product(xv.dims, 2);
    const std::vector<int64_t> labels = read_ints(io.input(2));
    dispatch(FloatTypes{}, xv.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = xv.as<T>();
      const T* dloss = io.input(0).as<T>();
      const T* weights = io.has_in(3) ? io.input(3).as<T>() : nullptr;
      T* dx = io.output(0).as<T>();
      std::vector<double> w(static_cast<size_t>(n * d));
      double weight_sum = 0;
      for (int64_t i = 0; i < n * d; ++i) {
        const int64_t label = labels[static_cast<size_t>(i)];
        if (has_ignore_ && label == ignore_) continue;
        if (label < 0 || label >= classes)
          throw InputError("label " + std::to_string(label) + " is out of range for " + std::to_string(classes) +
                           " classes");
        w[static_cast<size_t>(i)] = weights ? static_cast<double>(load(weights[label])) : 1.0;
        weight_sum += w[static_cast<size_t>(i)];
      }
      const double scalar = reduction_ == "none" ? 0.0 : static_cast<double>(load(dloss[0]));
      const double scale = reduction_ == "mean" ? scalar / weight_sum : scalar;
      parallel_for(n, ctx.threads, 1, [&](int64_t i0, int64_t i1) {
        std::vector<double> p(static_cast<size_t>(classes));
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = 0; j < d; ++j) {
            const size_t item = static_cast<size_t>(i * d + j);
            // An ignored row scales by exactly 0, also when every row is ignored (scale 1/0): its
            // gradient is 0, NaN where its scores are, as PyTorch's.
            const double g =
                w[item] == 0 ? 0.0 : w[item] * (reduction_ == "none" ? static_cast<double>(load(dloss[item])) : scale);
            auto at = [&](int64_t c) { return (i * classes + c) * d + j; };
            if (softmax_) {
              double top = -INFINITY, sum = 0;
              for (int64_t c = 0; c < classes; ++c) top = std::max(top, static_cast<double>(load(x[at(c)])));
              for (int64_t c = 0; c < classes; ++c) {
                p[static_cast<size_t>(c)] = std::exp(static_cast<double>(load(x[at(c)])) - top);
                sum += p[static_cast<size_t>(c)];
              }
              for (int64_t c = 0; c < classes; ++c) p[static_cast<size_t>(c)] /= sum;
            } else {
              std::fill(p.begin(), p.end(), 0.0);
            }
            const int64_t label = labels[item];
            for (int64_t c = 0; c < classes; ++c) {
              const double onehot = c == label ? 1.0 : 0.0;
              dx[at(c)] = convert<T>(g * (p[static_cast<size_t>(c)] - onehot));
            }
          }
      });
    });
  }

 private:
  bool softmax_;
  std::string reduction_;
  bool has_ignore_;
  int64_t ignore_;
};

struct SoftmaxCrossEntropyLossGrad final : ClassificationLossGrad {
  SoftmaxCrossEntropyLossGrad(const Node& n, int64_t) : ClassificationLossGrad(n, true) {}
};
struct NegativeLogLikelihoodLossGrad final : ClassificationLossGrad {
  NegativeLogLikelihoodLossGrad(const Node& n, int64_t) : ClassificationLossGrad(n, false) {}
};

}  // namespace

const std::vector<OpEntry>& grad_loss_ops() {
  static const std::vector<OpEntry> ops = {
      {"SoftmaxCrossEntropyLossGrad", make_kernel<SoftmaxCrossEntropyLossGrad>, FloatTypes::mask(), {}},
      {"NegativeLogLikelihoodLossGrad", make_kernel<NegativeLogLikelihoodLossGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
