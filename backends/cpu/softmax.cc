// Softmax and LogSoftmax along one axis (opset 13+), or over the flattened trailing dims from the
// axis on (before opset 13). Max-subtracted, summed in fp32 (fp64 for double), rounded once.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernel_util.h"
#include "graph/fast_math.h"

namespace amp::cpu {
namespace {

// out[i] = e^(in[i] - shift) along a contiguous line (graph/fast_math.h's exp: the loop vectorises).
AMP_VECTOR_CLONES void exp_shifted(const float* in, float* out, int64_t n, float shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = amp_expf(in[i] - shift);
}

template <bool kLog>
class Softmax final : public Kernel {
 public:
  Softmax(const Node& n, int64_t opset) : flatten_(opset < 13), axis_(n.attr_int("axis", opset < 13 ? 1 : -1)) {}


  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t outer = product(x.dims, 0, axis);
    const int64_t len = flatten_ ? product(x.dims, axis) : (x.rank() ? x.dims[axis] : 1);
    const int64_t inner = flatten_ ? 1 : product(x.dims, axis + 1);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(outer * inner, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1)),
                   [&](int64_t l0, int64_t l1) {
                     for (int64_t line = l0; line < l1; ++line) {
                       const int64_t base = line / inner * len * inner + line % inner;
                       C mx = -std::numeric_limits<C>::infinity();
                       for (int64_t i = 0; i < len; ++i) mx = std::max(mx, load(in[base + i * inner]));
                       C sum = 0;
                       if constexpr (!kLog && std::is_same_v<T, float>) {
                         if (inner == 1) {  // a contiguous line: the exponentials in one vector loop, then summed in order
                           exp_shifted(in + base, out + base, len, mx);
                           for (int64_t i = 0; i < len; ++i) sum += out[base + i];
                           for (int64_t i = 0; i < len; ++i) out[base + i] /= sum;
                           continue;
                         }
                       }
                       if constexpr (!kLog && std::is_same_v<T, C>) {
                         // Each exponential computed once: kept in the output, then divided there.
                         for (int64_t i = 0; i < len; ++i) {
                           const C e = fast_exp(in[base + i * inner] - mx);
                           out[base + i * inner] = e;
                           sum += e;
                         }
                         for (int64_t i = 0; i < len; ++i) out[base + i * inner] /= sum;
                         continue;
                       }
                       for (int64_t i = 0; i < len; ++i) sum += fast_exp(load(in[base + i * inner]) - mx);
                       if constexpr (kLog) {
                         const C lse = std::log(sum);
                         for (int64_t i = 0; i < len; ++i)
                           out[base + i * inner] = store<T>(load(in[base + i * inner]) - mx - lse);
                       } else {
                         for (int64_t i = 0; i < len; ++i)
                           out[base + i * inner] = store<T>(fast_exp(load(in[base + i * inner]) - mx) / sum);
                       }
                     }
                   });
    });
  }

 private:
  bool flatten_;
  int64_t axis_;
};

}  // namespace

const std::vector<OpEntry>& softmax_ops() {
  static const std::vector<OpEntry> ops = {
      {"Softmax", make_kernel<Softmax<false>>, FloatTypes::mask(), {}},
      {"LogSoftmax", make_kernel<Softmax<true>>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
