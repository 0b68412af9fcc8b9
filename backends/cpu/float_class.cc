// IsNaN and IsInf: which elements of a float tensor are NaN, or infinite (IsInf's detect_positive
// and detect_negative choose the signs, both by default), as bool. 16-bit values are widened to
// fp32, which keeps every NaN and infinity.
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// y = test(x) for every element, bool.
template <class Test>
void classify(KernelIO& io, const RunContext& ctx, Test test) {
  const View& x = io.input(0);
  dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.as<T>();
    bool* out = io.output(0).as<bool>();
    parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = test(load(in[i]));
    });
  });
}

class IsNaN final : public Kernel {
 public:
  IsNaN(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    classify(io, ctx, [](auto v) { return v != v; });
  }
};

class IsInf final : public Kernel {
 public:
  IsInf(const Node& n, int64_t)
      : positive_(n.attr_int("detect_positive", 1) != 0), negative_(n.attr_int("detect_negative", 1) != 0) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const bool positive = positive_, negative = negative_;
    classify(io, ctx, [positive, negative](auto v) {
      using C = decltype(v);
      return (positive && v == std::numeric_limits<C>::infinity()) ||
             (negative && v == -std::numeric_limits<C>::infinity());
    });
  }

 private:
  bool positive_, negative_;
};

}  // namespace

const std::vector<OpEntry>& float_class_ops() {
  static const std::vector<OpEntry> ops = {
      {"IsNaN", make_kernel<IsNaN>, FloatTypes::mask(), {}},
      {"IsInf", make_kernel<IsInf>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
