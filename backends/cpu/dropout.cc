// Dropout. In inference (no training_mode input, or false; and always before opset 12) it is the
// identity with an all-true mask. In training it keeps each element with probability 1 - ratio
// and scales kept ones by 1 / (1 - ratio). The draw is a counter-based hash of (run seed, element),
// so it is reproducible for a given CompileOptions::seed, differs run to run, and parallelizes.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Dropout final : public Kernel {
 public:
  Dropout(const Node& n, int64_t opset)
      : modern_(opset >= 12), seed_(static_cast<uint64_t>(n.attr_int("seed", 0))) {}


  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    bool* mask = io.has_out(1) ? io.output(1).as<bool>() : nullptr;
    const bool training = modern_ && io.has_in(2) && io.input(2).as<bool>()[0];
    double ratio = 0.5;
    if (io.has_in(1))
      dispatch(FloatTypes{}, io.input(1).dtype, [&](auto tag) {
        using R = typename decltype(tag)::type;
        ratio = static_cast<double>(load(io.input(1).as<R>()[0]));
      });
    if (!training || ratio == 0.0) {
      if (x.nbytes()) std::memcpy(io.output(0).data, x.data, x.nbytes());
      if (mask) std::fill(mask, mask + x.numel(), true);
      return;
    }
    if (ratio < 0.0 || ratio >= 1.0) throw InputError("Dropout ratio must be in [0, 1)");
    const uint64_t seed = mix64(ctx.seed ^ mix64(seed_));
    // Keep when a uniform 24-bit draw is >= ratio * 2^24.
    const uint64_t threshold = static_cast<uint64_t>(ratio * 16777216.0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const C scale = static_cast<C>(1.0 / (1.0 - ratio));
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const bool keep = (mix64(seed + static_cast<uint64_t>(i)) >> 40) >= threshold;
          out[i] = store<T>(keep ? static_cast<C>(load(in[i]) * scale) : C(0));
          if (mask) mask[i] = keep;
        }
      });
    });
  }

 private:
  bool modern_;
  uint64_t seed_;
};

}  // namespace

const std::vector<OpEntry>& dropout_ops() {
  static const std::vector<OpEntry> ops = {
      {"Dropout", make_kernel<Dropout>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
