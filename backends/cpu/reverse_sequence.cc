// ReverseSequence: for each batch entry b, the first sequence_lens[b] steps along the time axis
// reversed, the rest copied (time_axis and batch_axis are 0 and 1, either way round). It moves
// bytes, so it takes every element type.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class ReverseSequence final : public Kernel {
 public:
  ReverseSequence(const Node& n, int64_t) : time_axis_(n.attr_int("time_axis", 0)), batch_axis_(n.attr_int("batch_axis", 1)) {
    if (!((time_axis_ == 0 && batch_axis_ == 1) || (time_axis_ == 1 && batch_axis_ == 0)))
      throw InputError("ReverseSequence's time_axis and batch_axis must be 0 and 1 (either way round), got " +
                       std::to_string(time_axis_) + " and " + std::to_string(batch_axis_));
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    if (x.rank() < 2) throw InputError("ReverseSequence needs an input of rank >= 2");
    const int64_t steps = x.dims[static_cast<size_t>(time_axis_)], batch = x.dims[static_cast<size_t>(batch_axis_)];
    const std::vector<int64_t> lens = read_ints(io.input(1));
    if (static_cast<int64_t>(lens.size()) != batch)
      throw InputError("ReverseSequence's sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " +
                       std::to_string(batch));
    const size_t block = static_cast<size_t>(product(x.dims, 2)) * dtype_size(x.dtype);
    // Block (t, b)'s index in the layout: [T, B, ...] or [B, T, ...].
    auto at = [&](int64_t t, int64_t b) { return static_cast<size_t>(time_axis_ == 0 ? t * batch + b : b * steps + t); };
    const auto* src = static_cast<const uint8_t*>(x.data);
    auto* dst = static_cast<uint8_t*>(io.output(0).data);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens[static_cast<size_t>(b)];
      if (len < 0 || len > steps)
        throw InputError("ReverseSequence's length " + std::to_string(len) + " is out of range for " + std::to_string(steps) +
                         " steps");
      for (int64_t t = 0; t < steps; ++t)
        std::memcpy(dst + at(t, b) * block, src + at(t < len ? len - 1 - t : t, b) * block, block);
    }
  }

 private:
  int64_t time_axis_, batch_axis_;
};

}  // namespace

const std::vector<OpEntry>& reverse_sequence_ops() {
  static const std::vector<OpEntry> ops = {{"ReverseSequence", make_kernel<ReverseSequence>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
