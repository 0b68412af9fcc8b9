// EyeLike: a matrix of the input's shape with ones on the diagonal j - i == k and zeros elsewhere,
// of the `dtype` attribute's type (the input's by default).
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

using EyeTypes = JoinTypes<NumericTypes, TypeList<bool>>::type;

class EyeLike final : public Kernel {
 public:
  EyeLike(const Node& n, int64_t) : k_(n.attr_int("k", 0)) {}
  void run(KernelIO& io, const RunContext&) const override {
    View& out = io.output(0);
    const int64_t rows = out.dims[0], cols = out.dims[1];
    if (out.nbytes()) std::memset(out.data, 0, out.nbytes());
    dispatch(EyeTypes{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = out.as<T>();
      for (int64_t i = std::max<int64_t>(0, -k_); i < rows && i + k_ < cols; ++i) o[i * cols + i + k_] = convert<T>(1.0f);
    });
  }

 private:
  int64_t k_;
};

}  // namespace

const std::vector<OpEntry>& eye_like_ops() {
  static const std::vector<OpEntry> ops = {{"EyeLike", make_kernel<EyeLike>, AllTypes::mask(), {}, false}};
  return ops;
}

}  // namespace amp::cpu
