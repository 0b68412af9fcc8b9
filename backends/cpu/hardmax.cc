// Hardmax (opset 13): 1 at the first largest element along `axis` (default -1), 0 elsewhere. A
// NaN counts as the largest, as ArgMax has it (the first NaN of a lane wins).
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Hardmax final : public Kernel {
 public:
  Hardmax(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    View& out = io.output(0);
    if (out.numel() == 0) return;
    if (x.rank() == 0) throw InputError("Hardmax needs an input of rank >= 1");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t outer = product(x.dims, 0, axis), r = x.dims[axis], inner = product(x.dims, axis + 1);
    std::memset(out.data, 0, out.nbytes());
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* o = out.as<T>();
      parallel_for(outer * inner, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r, 1)),
                   [&](int64_t l0, int64_t l1) {
                     for (int64_t l = l0; l < l1; ++l) {
                       const int64_t base = l / inner * r * inner + l % inner;
                       C best = load(in[base]);
                       int64_t at = 0;
                       for (int64_t k = 1; k < r && best == best; ++k) {
                         const C v = load(in[base + k * inner]);
                         if (v > best || v != v) {
                           best = v;
                           at = k;
                         }
                       }
                       o[base + at * inner] = convert<T>(1.0f);
                     }
                   });
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<OpEntry>& hardmax_ops() {
  static const std::vector<OpEntry> ops = {{"Hardmax", make_kernel<Hardmax>, FloatTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
