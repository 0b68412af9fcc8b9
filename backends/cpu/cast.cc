// Cast between any two numeric or bool types. To fp16/bf16 it rounds to nearest-even once (from
// float64 too, see convert()), to integers it truncates toward zero like C and numpy.
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Cast final : public Kernel {
 public:
  Cast(const Node& n, int64_t) : to_(static_cast<DType>(n.attr_int("to", 0))) {
    if (!is_valid_dtype(static_cast<int32_t>(to_))) throw InputError("attribute 'to' is not an element type");
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(AllTypes{}, x.dtype, [&](auto from) {
      using F = typename decltype(from)::type;
      dispatch(AllTypes{}, to_, [&](auto to) {
        using T = typename decltype(to)::type;
        const F* in = x.as<F>();
        T* out = io.output(0).as<T>();
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

 private:
  DType to_;
};

}  // namespace

const std::vector<OpEntry>& cast_ops() {
  static const std::vector<OpEntry> ops = {
      {"Cast", make_kernel<Cast>, AllTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
