// Tile: the input repeated `repeats[d]` times along each dim d. Each output row (the last dim) is
// its source row copied repeats[-1] times; the rows above it are found by their coordinates modulo
// the input's dims. It moves bytes, so it takes every element type.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Tile final : public Kernel {
 public:
  Tile(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    View& out = io.output(0);
    if (out.numel() == 0) return;
    const size_t esize = dtype_size(x.dtype);
    const auto* src = static_cast<const uint8_t*>(x.data);
    auto* dst = static_cast<uint8_t*>(out.data);
    if (x.rank() == 0) {
      std::memcpy(dst, src, esize);
      return;
    }
    const size_t rank = x.rank();
    const int64_t in_row = x.dims.back(), out_row = out.dims.back(), times = out_row / std::max<int64_t>(in_row, 1);
    const int64_t rows = out.numel() / out_row;
    const std::vector<int64_t> in_strides = strides_of(x.dims);
    const size_t row_bytes = static_cast<size_t>(in_row) * esize;
    parallel_for(rows, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(out_row, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     // The source row: the output row's coordinates (dims above the last) modulo x's dims.
                     int64_t rest = r, from = 0;
                     for (size_t d = rank - 1; d-- > 0;) {
                       from += rest % out.dims[d] % x.dims[d] * in_strides[d];
                       rest /= out.dims[d];
                     }
                     uint8_t* row = dst + static_cast<size_t>(r * out_row) * esize;
                     for (int64_t t = 0; t < times; ++t)
                       std::memcpy(row + static_cast<size_t>(t) * row_bytes, src + static_cast<size_t>(from) * esize, row_bytes);
                   }
                 });
  }
};

}  // namespace

const std::vector<OpEntry>& tile_ops() {
  static const std::vector<OpEntry> ops = {{"Tile", make_kernel<Tile>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
