// SoftmaxGrad(dY, Y): Softmax's input gradient dX = Y (dY - sum(dY Y)) along the axis, one op so
// that a backend can read the attention matrix once (what autodiff wrote as Mul, ReduceSum, Sub
// and Mul read it three times). The row sum runs in fp64 in a fixed order; dX is rounded once.
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class SoftmaxGrad final : public Kernel {
 public:
  SoftmaxGrad(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)) {}
  size_t infer(KernelIO& io) const override {
    const View& dy = io.input(0);
    const View& y = io.input(1);
    if (dy.dims != y.dims || dy.dtype != y.dtype)
      throw InputError("SoftmaxGrad needs dY and Y of one type and shape, got " + dims_str(dy.dims) + " and " +
                       dims_str(y.dims));
    normalize_axis(axis_, static_cast<int64_t>(y.dims.size()));
    io.output(0).dtype = y.dtype;
    io.output(0).dims = y.dims;
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& y = io.input(1);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(y.dims.size())));
    const int64_t outer = product(y.dims, 0, axis), len = y.dims[axis], inner = product(y.dims, axis + 1);
    dispatch(FloatTypes{}, y.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* dy = io.input(0).as<T>();
      const T* yp = y.as<T>();
      T* dx = io.output(0).as<T>();
      parallel_for(outer * inner, ctx.threads, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t base = (r / inner) * len * inner + r % inner;
          double dot = 0;
          for (int64_t c = 0; c < len; ++c)
            dot += static_cast<double>(load(dy[base + c * inner])) * static_cast<double>(load(yp[base + c * inner]));
          for (int64_t c = 0; c < len; ++c) {
            const int64_t at = base + c * inner;
            dx[at] = convert<T>(static_cast<double>(load(yp[at])) * (static_cast<double>(load(dy[at])) - dot));
          }
        }
      });
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<OpEntry>& grad_softmax_ops() {
  static const std::vector<OpEntry> ops = {
      {"SoftmaxGrad", make_kernel<SoftmaxGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
