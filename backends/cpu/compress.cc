// Compress: the slices along `axis` whose condition (a bool vector, possibly shorter than the axis)
// is true; without an axis, the flattened input's elements. The condition decides the output's
// extent, so it is a shape input (the shape rule counts it): computed while planning. It moves
// bytes, so it takes every element type.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Compress final : public Kernel {
 public:
  Compress(const Node& n, int64_t) : has_axis_(n.attr("axis") != nullptr), axis_(n.attr_int("axis", 0)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View &x = io.input(0), &cond = io.input(1);
    int64_t outer = 1, extent = x.numel(), inner = 1;
    if (has_axis_) {
      const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
      outer = product(x.dims, 0, axis);
      extent = x.dims[axis];
      inner = product(x.dims, axis + 1);
    }
    const bool* keep = cond.as<bool>();
    const int64_t n = std::min(extent, cond.numel());
    const size_t block = static_cast<size_t>(inner) * dtype_size(x.dtype);
    const auto* src = static_cast<const uint8_t*>(x.data);
    auto* dst = static_cast<uint8_t*>(io.output(0).data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < n; ++i)
        if (keep[i]) {
          std::memcpy(dst, src + static_cast<size_t>(o * extent + i) * block, block);
          dst += block;
        }
  }

 private:
  bool has_axis_;
  int64_t axis_;
};

}  // namespace

const std::vector<OpEntry>& compress_ops() {
  static const std::vector<OpEntry> ops = {{"Compress", make_kernel<Compress>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
