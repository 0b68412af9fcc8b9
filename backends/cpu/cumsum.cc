// CumSum: running sums along an axis (its input 1, a scalar), inclusive or exclusive, forward or
// reversed. Floats sum in fp32 (fp64 for double) and 16-bit types round each output once, as the
// other kernels do; integers sum in their own type.
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

using CumSumTypes = JoinTypes<FloatTypes, TypeList<int32_t, int64_t, uint32_t, uint64_t>>::type;

class CumSum final : public Kernel {
 public:
  CumSum(const Node& n, int64_t) : exclusive_(n.attr_int("exclusive", 0) != 0), reverse_(n.attr_int("reverse", 0) != 0) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const std::vector<int64_t> axis_value = read_ints(io.input(1));
    if (axis_value.size() != 1) throw InputError("CumSum's axis must be a single integer");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_value[0], static_cast<int64_t>(x.rank())));
    const int64_t outer = product(x.dims, 0, axis), extent = x.dims.empty() ? 1 : x.dims[axis];
    const int64_t inner = product(x.dims, axis + 1);
    dispatch(CumSumTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.as<T>();
      T* dst = io.output(0).as<T>();
      parallel_for(outer * inner, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(extent, 1)),
                   [&](int64_t l0, int64_t l1) {
                     for (int64_t l = l0; l < l1; ++l) {
                       const int64_t base = l / inner * extent * inner + l % inner;
                       compute_t<T> sum = 0;
                       for (int64_t s = 0; s < extent; ++s) {
                         const int64_t at = base + (reverse_ ? extent - 1 - s : s) * inner;
                         const compute_t<T> v = load(src[at]);
                         if (!exclusive_) sum += v;
                         dst[at] = store<T>(sum);
                         if (exclusive_) sum += v;
                       }
                     }
                   });
    });
  }

 private:
  bool exclusive_, reverse_;
};

}  // namespace

const std::vector<OpEntry>& cumsum_ops() {
  static const std::vector<OpEntry> ops = {{"CumSum", make_kernel<CumSum>, CumSumTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
