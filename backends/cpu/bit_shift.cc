// BitShift(X, Y): X shifted by Y bits, LEFT or RIGHT as the direction attribute says, on unsigned
// integers of one type (the shape rule checks) with numpy broadcasting. A shift by the type's
// width or more gives 0, as numpy's left_shift and right_shift (C leaves it undefined).
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

using UnsignedTypes = TypeList<uint8_t, uint16_t, uint32_t, uint64_t>;

class BitShift final : public Kernel {
 public:
  BitShift(const Node& n, int64_t) {
    const std::string direction = n.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      throw InputError("direction is '" + direction + "'; BitShift takes LEFT or RIGHT");
    left_ = direction == "LEFT";
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &y = io.input(1);
    const Broadcast bc({&x.dims, &y.dims});
    const bool left = left_;
    dispatch(UnsignedTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.as<T>();
      const T* py = y.as<T>();
      T* po = io.output(0).as<T>();
      const int64_t sx = bc.inner_stride(0), sy = bc.inner_stride(1);
      for_each_row(bc, ctx.threads, [&](int64_t o, const int64_t* offs, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const T v = px[offs[0] + i * sx], s = py[offs[1] + i * sy];
          po[o + i] = s >= std::numeric_limits<T>::digits ? T(0) : static_cast<T>(left ? v << s : v >> s);
        }
      });
    });
  }

 private:
  bool left_ = true;
};

}  // namespace

const std::vector<OpEntry>& bit_shift_ops() {
  static const std::vector<OpEntry> ops = {
      {"BitShift", make_kernel<BitShift>, UnsignedTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
