// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp and ReduceSumSquare over any set of axes, given as an attribute (older opsets) or
// as input 1 (ReduceSum from opset 13, the others from 18). Accumulators are fp32 for 16-bit
// types — an fp16 running sum stops growing at 2048 when it adds ones. A single contiguous run of
// reduced axes (the common case: last axis, or the spatial dims) reduces as [outer, R, inner];
// other axis sets walk the input once with an index per dim.
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

enum class Reduction { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <Reduction kOp>
class Reduce final : public Kernel {
 public:
  Reduce(const Node& n, int64_t)
      : axes_attr_(n.attr_ints("axes")),
        noop_empty_(n.attr_int("noop_with_empty_axes", 0) != 0) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    // The accumulators; ReduceLogSumExp keeps the maxima and then the shifted sums.
    return static_cast<size_t>(io.output(0).numel()) * (kOp == Reduction::kLogSumExp ? 16 : 8);
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const std::vector<bool> reduced = reduced_axes(io);
    dispatch(NumericTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      // Logarithms and roots of integer sums are taken in double and truncated, as ONNX's reference does.
      using F = std::conditional_t<std::is_floating_point_v<C>, C, double>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      const int64_t count_out = io.output(0).numel();
      C* acc = static_cast<C*>(io.workspace);
      // ONNX: the max of an empty set is -inf where the type has it, else the type's lowest (the
      // min's +inf, else the type's largest).
      constexpr bool kMaxFirst = kOp == Reduction::kMax || kOp == Reduction::kLogSumExp;
      C init = kOp == Reduction::kProd ? C(1) : C(0);
      if constexpr (kMaxFirst)
        init = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
      if constexpr (kOp == Reduction::kMin)
        init = std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
      std::fill(acc, acc + count_out, init);
      auto fold = [](C a, C v) -> C {
        if constexpr (kMaxFirst || kOp == Reduction::kMin) {
          if constexpr (std::is_floating_point_v<C>)
            if (v != v) return v;  // NaN wins, as in torch.amax/amin
          if constexpr (kOp == Reduction::kMin) return v < a ? v : a;
          return v > a ? v : a;
        } else if constexpr (kOp == Reduction::kProd) {
          return a * v;
        } else if constexpr (kOp == Reduction::kL1) {
          if constexpr (std::is_unsigned_v<C>) return a + v;
          else return a + (v < C(0) ? C(-v) : v);
        } else if constexpr (kOp == Reduction::kL2 || kOp == Reduction::kSumSquare) {
          return a + v * v;
        } else {
          return a + v;
        }
      };
      int64_t reduced_count = 1;
      for (size_t i = 0; i < reduced.size(); ++i)
        if (reduced[i]) reduced_count *= x.dims[i];
      walk(x, reduced, ctx, [&](int64_t o, int64_t e) { acc[o] = fold(acc[o], load(in[e])); });
      if constexpr (kOp == Reduction::kLogSumExp) {
        // log Σ exp(x) = m + log Σ exp(x - m) with m the max: no term overflows. An infinite or NaN
        // max is the result itself (all -inf: log 0; a +inf or a NaN among the terms).
        F* sums = reinterpret_cast<F*>(static_cast<char*>(io.workspace) + static_cast<size_t>(count_out) * 8);
        std::fill(sums, sums + count_out, F(0));
        walk(x, reduced, ctx, [&](int64_t o, int64_t e) {
          sums[o] += std::exp(static_cast<F>(load(in[e])) - static_cast<F>(acc[o]));
        });
        for (int64_t i = 0; i < count_out; ++i) {
          const F m = static_cast<F>(acc[i]);
          out[i] = store<T>(static_cast<C>(std::isfinite(m) ? m + std::log(sums[i]) : m));
        }
        return;
      }
      for (int64_t i = 0; i < count_out; ++i) {
        C v = acc[i];
        if constexpr (kOp == Reduction::kMean) v = static_cast<C>(v / static_cast<C>(reduced_count));
        if constexpr (kOp == Reduction::kL2) v = static_cast<C>(std::sqrt(static_cast<F>(v)));
        if constexpr (kOp == Reduction::kLogSum) v = static_cast<C>(std::log(static_cast<F>(v)));
        out[i] = store<T>(v);
      }
    });
  }

 private:
  // Calls visit(output index, input index) for every input element, each output's elements in
  // input order. Neighbouring dims of the same status merge into runs; one reduced run is
  // [outer, r, inner], split over threads by outer (each thread owns its outputs).
  template <class Visit>
  static void walk(const View& x, const std::vector<bool>& reduced, const RunContext& ctx, Visit visit) {
    std::vector<int64_t> runs;
    std::vector<bool> run_reduced;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (x.dims[i] == 1) continue;
      if (!runs.empty() && run_reduced.back() == reduced[i]) {
        runs.back() *= x.dims[i];
      } else {
        runs.push_back(x.dims[i]);
        run_reduced.push_back(reduced[i]);
      }
    }
    const size_t first_reduced = std::find(run_reduced.begin(), run_reduced.end(), true) - run_reduced.begin();
    const size_t n_reduced = std::count(run_reduced.begin(), run_reduced.end(), true);
    if (n_reduced <= 1) {
      const int64_t outer = product(runs, 0, first_reduced);
      const int64_t r = first_reduced < runs.size() ? runs[first_reduced] : 1;
      const int64_t inner = product(runs, first_reduced + 1);
      parallel_for(outer, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r * inner, 1)),
                   [&](int64_t o0, int64_t o1) {
                     for (int64_t o = o0; o < o1; ++o)
                       for (int64_t k = 0; k < r; ++k) {
                         const int64_t src = (o * r + k) * inner, dst = o * inner;
                         for (int64_t i = 0; i < inner; ++i) visit(dst + i, src + i);
                       }
                   });
      return;
    }
    // Output strides of the runs (0 for reduced runs), then one pass over the input.
    std::vector<int64_t> out_stride(runs.size(), 0);
    int64_t s = 1;
    for (size_t i = runs.size(); i-- > 0;)
      if (!run_reduced[i]) {
        out_stride[i] = s;
        s *= runs[i];
      }
    std::vector<int64_t> idx(runs.size(), 0);
    const int64_t total = x.numel();
    int64_t o = 0;
    for (int64_t e = 0; e < total; ++e) {
      visit(o, e);
      for (size_t d = runs.size(); d-- > 0;) {
        o += out_stride[d];
        if (++idx[d] < runs[d]) break;
        o -= out_stride[d] * runs[d];
        idx[d] = 0;
      }
    }
  }

  std::vector<bool> reduced_axes(const KernelIO& io) const {
    const int64_t rank = static_cast<int64_t>(io.input(0).rank());
    const std::vector<int64_t> axes = io.has_in(1) ? read_ints(io.input(1)) : axes_attr_;
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && !noop_empty_);
    for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
    return reduced;
  }

  std::vector<int64_t> axes_attr_;
  bool noop_empty_;
};

}  // namespace

const std::vector<OpEntry>& reduce_ops() {
  static const std::vector<OpEntry> ops = {
      {"ReduceSum", make_kernel<Reduce<Reduction::kSum>>, NumericTypes::mask(), {}},
      {"ReduceMean", make_kernel<Reduce<Reduction::kMean>>, NumericTypes::mask(), {}},
      {"ReduceMax", make_kernel<Reduce<Reduction::kMax>>, NumericTypes::mask(), {}},
      {"ReduceMin", make_kernel<Reduce<Reduction::kMin>>, NumericTypes::mask(), {}},
      // keras2onnx's Tensordot multiplies a tensor's dims with it (TFBertForQuestionAnswering).
      {"ReduceProd", make_kernel<Reduce<Reduction::kProd>>, NumericTypes::mask(), {}},
      {"ReduceL1", make_kernel<Reduce<Reduction::kL1>>, NumericTypes::mask(), {}},
      {"ReduceL2", make_kernel<Reduce<Reduction::kL2>>, NumericTypes::mask(), {}},
      {"ReduceLogSum", make_kernel<Reduce<Reduction::kLogSum>>, NumericTypes::mask(), {}},
      {"ReduceLogSumExp", make_kernel<Reduce<Reduction::kLogSumExp>>, NumericTypes::mask(), {}},
      {"ReduceSumSquare", make_kernel<Reduce<Reduction::kSumSquare>>, NumericTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
