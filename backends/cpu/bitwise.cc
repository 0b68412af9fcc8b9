// ONNX's bitwise ops (opset 18, carried into ai.onnx_amp by the import): BitwiseAnd, BitwiseOr,
// BitwiseXor on two integer operands of one type (the shape rule checks) with numpy broadcasting,
// and BitwiseNot; the eight integer types, as numpy's bitwise_and / or / xor / invert.
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

enum class BitwiseOp { kAnd, kOr, kXor };

template <BitwiseOp kOp>
class BitwiseBinary final : public Kernel {
 public:
  BitwiseBinary(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    dispatch(IntTypes{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* pa = a.as<T>();
      const T* pb = b.as<T>();
      T* po = io.output(0).as<T>();
      const int64_t sa = bc.inner_stride(0), sb = bc.inner_stride(1);
      for_each_row(bc, ctx.threads, [&](int64_t o, const int64_t* offs, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const T x = pa[offs[0] + i * sa], y = pb[offs[1] + i * sb];
          if constexpr (kOp == BitwiseOp::kAnd) po[o + i] = static_cast<T>(x & y);
          else if constexpr (kOp == BitwiseOp::kOr) po[o + i] = static_cast<T>(x | y);
          else po[o + i] = static_cast<T>(x ^ y);
        }
      });
    });
  }
};

class BitwiseNot final : public Kernel {
 public:
  BitwiseNot(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(IntTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.as<T>();
      T* py = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) py[i] = static_cast<T>(~px[i]);
      });
    });
  }
};

}  // namespace

const std::vector<OpEntry>& bitwise_ops() {
  static const std::vector<OpEntry> ops = {
      {"BitwiseAnd", make_kernel<BitwiseBinary<BitwiseOp::kAnd>>, IntTypes::mask(), {}},
      {"BitwiseOr", make_kernel<BitwiseBinary<BitwiseOp::kOr>>, IntTypes::mask(), {}},
      {"BitwiseXor", make_kernel<BitwiseBinary<BitwiseOp::kXor>>, IntTypes::mask(), {}},
      {"BitwiseNot", make_kernel<BitwiseNot>, IntTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
