// ai.onnx_amp Gelu(X) and GeluGrad(dY, X), exact (erf) or tanh-approximated. One op each where an
// exported graph spells GELU with five to nine elementwise nodes: the forward rounds once instead
// of after every node, and the backward keeps only X alive (autodiff of the spelled-out form kept
// X / sqrt 2 and 1 + erf(...) too, two more activations of the MLP's widest layer). The math is
// graph/gelu.h's, which the fused kernels share; 16-bit tensors compute in fp32, round once.
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/error.h"
#include "graph/gelu.h"

namespace amp::cpu {
namespace {

GeluKind kind_of(const Node& n) {
  const std::string approximate = n.attr_string("approximate", "none");
  if (auto k = gelu_kind(approximate)) return *k;
  throw InputError("approximate is '" + approximate + "'; Gelu takes none or tanh");
}

class Gelu final : public Kernel {
 public:
  Gelu(const Node& n, int64_t) : kind_(kind_of(n)) {}
  size_t infer(KernelIO& io) const override {
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = io.input(0).dims;
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = store<T>(gelu(load(in[i]), kind_));
      });
    });
  }

 private:
  GeluKind kind_;
};

class GeluGrad final : public Kernel {
 public:
  GeluGrad(const Node& n, int64_t) : kind_(kind_of(n)) {}
  size_t infer(KernelIO& io) const override {
    const View& dy = io.input(0);
    const View& x = io.input(1);
    if (dy.dims != x.dims || dy.dtype != x.dtype)
      throw InputError("GeluGrad needs dY and X of one type and shape, got " + dims_str(dy.dims) + " and " +
                       dims_str(x.dims));
    io.output(0).dtype = x.dtype;
    io.output(0).dims = x.dims;
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(1);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* dy = io.input(0).as<T>();
      const T* xs = x.as<T>();
      T* dx = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dx[i] = store<T>(gelu_grad(load(dy[i]), load(xs[i]), kind_));
      });
    });
  }

 private:
  GeluKind kind_;
};

}  // namespace

const std::vector<OpEntry>& gelu_ops() {
  static const std::vector<OpEntry> ops = {
      {"Gelu", make_kernel<Gelu>, FloatTypes::mask(), {}},
      {"GeluGrad", make_kernel<GeluGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
