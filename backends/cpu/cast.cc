// Cast (and CastLike, which takes its target type from its second input) between any two numeric
// or bool types. To fp16/bf16 it rounds to nearest-even once (from float64 too, see convert()), to
// integers it truncates toward zero like C and numpy.
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// x converted to `to`, element by element.
void convert_to(const View& x, View& y, DType to, const RunContext& ctx) {
  dispatch(AllTypes{}, x.dtype, [&](auto from) {
    using F = typename decltype(from)::type;
    dispatch(AllTypes{}, to, [&](auto into) {
      using T = typename decltype(into)::type;
      const F* in = x.as<F>();
      T* out = y.as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        // The casts a mixed-precision graph is full of, fp32 <-> fp16/bf16, in bulk.
        if constexpr (std::is_same_v<F, float> && (std::is_same_v<T, f16> || std::is_same_v<T, bf16>))
          narrow(in + b, out + b, e - b);
        else if constexpr (std::is_same_v<T, float> && (std::is_same_v<F, f16> || std::is_same_v<F, bf16>))
          widen(in + b, out + b, e - b);
        else
          for (int64_t i = b; i < e; ++i) out[i] = convert<T>(in[i]);
      });
    });
  });
}

class Cast final : public Kernel {
 public:
  Cast(const Node& n, int64_t) : to_(static_cast<DType>(n.attr_int("to", 0))) {
    if (!is_valid_dtype(static_cast<int32_t>(to_))) throw InputError("attribute 'to' is not an element type");
  }
  void run(KernelIO& io, const RunContext& ctx) const override { convert_to(io.input(0), io.output(0), to_, ctx); }

 private:
  DType to_;
};

// CastLike(x, target_type): Cast to target_type's element type (its data is not read).
class CastLike final : public Kernel {
 public:
  CastLike(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    convert_to(io.input(0), io.output(0), io.input(1).dtype, ctx);
  }
};

}  // namespace

const std::vector<OpEntry>& cast_ops() {
  static const std::vector<OpEntry> ops = {
      {"Cast", make_kernel<Cast>, AllTypes::mask(), {}},
      {"CastLike", make_kernel<CastLike>, AllTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
