// NonZero: the int64 coordinates [rank, count] of the input's nonzero elements, in row-major
// order. Its output's extent depends on the input's contents, so its input is a shape input (the
// shape rule counts the nonzeros): the planner computes it, and whatever it depends on, while
// planning, once per plan signature, as it does Reshape's shape. A rank-0 input is taken as one
// element, [0, count].
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class NonZero final : public Kernel {
 public:
  NonZero(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const size_t rank = x.rank();
    const int64_t count = io.output(0).dims[1];
    int64_t* out = io.output(0).as<int64_t>();
    dispatch(AllTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* v = x.as<T>();
      std::vector<int64_t> coord(rank, 0);
      int64_t j = 0;
      for (int64_t e = 0; e < x.numel(); ++e) {
        if (load(v[e]) != 0) {
          if (j >= count) throw InputError("NonZero: the input changed since its nonzeros were counted");
          for (size_t d = 0; d < rank; ++d) out[static_cast<int64_t>(d) * count + j] = coord[d];
          ++j;
        }
        for (size_t d = rank; d-- > 0;) {
          if (++coord[d] < x.dims[d]) break;
          coord[d] = 0;
        }
      }
    });
  }
};

}  // namespace

const std::vector<OpEntry>& nonzero_ops() {
  static const std::vector<OpEntry> ops = {{"NonZero", make_kernel<NonZero>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
