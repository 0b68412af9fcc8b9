// TopK: the k largest (or smallest) elements along an axis and their int64 indices, in order
// (best first; equal values by lower index first, as ONNX specifies). `sorted` 0 lets the order be
// any; this kernel always returns them sorted. NaN ranks above every number (as numpy sorts it last).
#include <algorithm>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class TopK final : public Kernel {
 public:
  TopK(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)), largest_(n.attr_int("largest", 1) != 0) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    if (x.rank() == 0) throw InputError("TopK needs an input of rank >= 1");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t extent = x.dims[axis], inner = product(x.dims, axis + 1), outer = product(x.dims, 0, axis);
    const int64_t k = io.output(0).dims[axis];
    dispatch(NumericTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.as<T>();
      T* values = io.output(0).as<T>();
      int64_t* indices = io.has_out(1) ? io.output(1).as<int64_t>() : nullptr;
      parallel_for(outer * inner, ctx.threads, std::max<int64_t>(1, 4096 / std::max<int64_t>(extent, 1)),
                   [&](int64_t l0, int64_t l1) {
                     std::vector<int64_t> order(static_cast<size_t>(extent));
                     for (int64_t l = l0; l < l1; ++l) {
                       const int64_t o = l / inner, i = l % inner;
                       const T* line = src + o * extent * inner + i;
                       for (int64_t e = 0; e < extent; ++e) order[static_cast<size_t>(e)] = e;
                       auto before = [&](int64_t a, int64_t b) {
                         const auto va = load(line[a * inner]), vb = load(line[b * inner]);
                         const bool na = va != va, nb = vb != vb;  // NaN ranks above every number
                         if (na || nb) return na && nb ? a < b : largest_ ? na : nb;
                         if (va != vb) return largest_ ? va > vb : va < vb;
                         return a < b;
                       };
                       std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
                       for (int64_t j = 0; j < k; ++j) {
                         const int64_t at = o * k * inner + j * inner + i;
                         values[at] = line[order[static_cast<size_t>(j)] * inner];
                         if (indices) indices[at] = order[static_cast<size_t>(j)];
                       }
                     }
                   });
    });
  }

 private:
  int64_t axis_;
  bool largest_;
};

}  // namespace

const std::vector<OpEntry>& top_k_ops() {
  static const std::vector<OpEntry> ops = {{"TopK", make_kernel<TopK>, NumericTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
