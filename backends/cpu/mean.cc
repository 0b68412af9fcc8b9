// Mean: the elementwise mean of one or more tensors of one float type, broadcast (numpy rules).
// The operands are added left to right in the compute type (fp32 for fp16 and bf16), divided by
// their count and rounded once on store, as ONNX Runtime's Mean computes (x0 + x1 + ...) / n.
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Mean final : public Kernel {
 public:
  Mean(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    return static_cast<size_t>(io.output(0).numel()) * sizeof(double);
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    View& out = io.output(0);
    dispatch(FloatTypes{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      C* acc = static_cast<C*>(io.workspace);
      for (size_t k = 0; k < io.in.size(); ++k) {
        const Broadcast bc({&out.dims, &io.input(k).dims});
        const T* in = io.input(k).as<T>();
        const int64_t stride = bc.inner_stride(1);
        for_each_row(bc, ctx.threads, [&](int64_t at, const int64_t* offs, int64_t n) {
          const T* row = in + offs[1];
          for (int64_t j = 0; j < n; ++j) {
            const C y = load(row[j * stride]);
            acc[at + j] = k == 0 ? y : acc[at + j] + y;
          }
        });
      }
      const C count = static_cast<C>(io.in.size());
      T* o = out.as<T>();
      parallel_for(out.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = store<T>(acc[i] / count);
      });
    });
  }
};

}  // namespace

const std::vector<OpEntry>& mean_ops() {
  static const std::vector<OpEntry> ops = {
      {"Mean", make_kernel<Mean>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
