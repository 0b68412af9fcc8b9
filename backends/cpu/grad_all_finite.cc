// AllFinite: one bool for all of a step's gradients — false when any element of any input is inf
// or NaN. The loss-scaled step reads it to skip the update and back the scale off, so the check
// never leaves the graph (no host round trip per tensor).
#include <cmath>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class AllFinite final : public Kernel {
 public:
  AllFinite(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    for (size_t i = 0; i < io.in.size(); ++i)
      if (io.has_in(i) && !is_floating(io.input(i).dtype)) throw InputError("AllFinite takes floating-point tensors");
    io.output(0).dtype = DType::kBool;
    io.output(0).dims = {};
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    bool finite = true;
    for (size_t i = 0; i < io.in.size() && finite; ++i) {
      if (!io.has_in(i)) continue;
      const View& v = io.input(i);
      dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = v.as<T>();
        int bad = 0;
        parallel_for(v.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
          int found = 0;
          for (int64_t k = b; k < e; ++k) found |= !std::isfinite(static_cast<double>(load(p[k])));
          if (found) {
#pragma omp atomic write
            bad = 1;
          }
        });
        finite = !bad;
      });
    }
    *io.output(0).as<bool>() = finite;
  }
};

}  // namespace

const std::vector<OpEntry>& grad_all_finite_ops() {
  static const std::vector<OpEntry> ops = {
      {"AllFinite", make_kernel<AllFinite>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
