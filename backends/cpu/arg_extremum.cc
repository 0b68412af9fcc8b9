// ArgMax and ArgMin: the int64 index of the largest (smallest) element along `axis` (default 0),
// the axis kept as 1 (keepdims, the default) or dropped. Ties go to the first index, or to the last
// with select_last_index. A NaN counts as larger and as smaller than any number, as numpy (ONNX's
// reference) and torch.argmax have it: the first NaN of a lane wins (the last with
// select_last_index). 16-bit values are compared as fp32, which orders them exactly.
#include "backends/cpu/kernel_util.h"
#include "graph/error.h"

namespace amp::cpu {
namespace {

template <bool kMax>
class ArgExtremum final : public Kernel {
 public:
  ArgExtremum(const Node& n, int64_t)
      : axis_(n.attr_int("axis", 0)), last_(n.attr_int("select_last_index", 0) != 0) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    if (io.input(0).dims.empty()) throw InputError("X must have a rank of at least 1");
    const int64_t r = io.input(0).dims[static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(io.input(0).rank())))];
    if (r == 0 && io.output(0).numel() > 0) throw InputError("the axis is empty: there is no extremum to index");
    return 0;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t outer = product(x.dims, 0, axis), r = x.dims[axis], inner = product(x.dims, axis + 1);
    int64_t* out = io.output(0).as<int64_t>();
    const bool last = last_;
    dispatch(NumericTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      // Whether v at a later index replaces the best so far.
      auto takes = [last](C v, C best) {
        if constexpr (std::is_floating_point_v<C>) {
          const bool v_nan = v != v, best_nan = best != best;
          if (best_nan) return last && v_nan;
          if (v_nan) return true;
        }
        if constexpr (kMax) return last ? v >= best : v > best;
        return last ? v <= best : v < best;
      };
      parallel_for(outer * inner, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r, 1)),
                   [&](int64_t l0, int64_t l1) {
                     for (int64_t l = l0; l < l1; ++l) {
                       const int64_t o = l / inner, i = l % inner;
                       const T* lane = in + o * r * inner + i;
                       C best = load(lane[0]);
                       int64_t at = 0;
                       for (int64_t k = 1; k < r; ++k) {
                         const C v = load(lane[k * inner]);
                         if (takes(v, best)) {
                           best = v;
                           at = k;
                         }
                       }
                       out[l] = at;
                     }
                   });
    });
  }

 private:
  int64_t axis_;
  bool last_;
};

}  // namespace

const std::vector<OpEntry>& arg_extremum_ops() {
  static const std::vector<OpEntry> ops = {
      {"ArgMax", make_kernel<ArgExtremum<true>>, NumericTypes::mask(), {}},
      {"ArgMin", make_kernel<ArgExtremum<false>>, NumericTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
