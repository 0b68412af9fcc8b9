// GatherND with batch_dims b: data [B..., D...] and indices [B..., M..., k] share their first b
// dims; each index tuple (the last dim of indices, k <= rank - b) picks a slice of data's dims
// after b + k within its batch. Output: indices' dims but the last, then the slice's dims.
// It moves bytes, so it takes every element type.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class GatherND final : public Kernel {
 public:
  GatherND(const Node& n, int64_t) : batch_dims_(n.attr_int("batch_dims", 0)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View &data = io.input(0), &indices = io.input(1);
    const size_t b = static_cast<size_t>(batch_dims_), k = static_cast<size_t>(indices.dims.back());
    const std::vector<int64_t> idx = read_ints(indices), strides = strides_of(data.dims);
    const int64_t batches = product(data.dims, 0, b), slice = product(data.dims, b + k);
    const int64_t tuples = product(indices.dims, 0, indices.rank() - 1) / std::max<int64_t>(batches, 1);
    const int64_t batch_stride = product(data.dims, b);
    const size_t esize = dtype_size(data.dtype), slice_bytes = static_cast<size_t>(slice) * esize;
    const auto* src = static_cast<const uint8_t*>(data.data);
    auto* dst = static_cast<uint8_t*>(io.output(0).data);
    for (int64_t n = 0; n < batches; ++n)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t* tuple = idx.data() + (n * tuples + t) * static_cast<int64_t>(k);
        int64_t at = n * batch_stride;
        for (size_t j = 0; j < k; ++j) {
          const int64_t dim = data.dims[b + j];
          int64_t i = tuple[j];
          if (i < -dim || i >= dim)
            throw InputError("GatherND index " + std::to_string(i) + " is out of range for dim " + std::to_string(b + j) +
                             " of extent " + std::to_string(dim));
          if (i < 0) i += dim;
          at += i * strides[b + j];
        }
        std::memcpy(dst + static_cast<size_t>(n * tuples + t) * slice_bytes, src + static_cast<size_t>(at) * esize, slice_bytes);
      }
  }

 private:
  int64_t batch_dims_;
};

}  // namespace

const std::vector<OpEntry>& gather_nd_ops() {
  static const std::vector<OpEntry> ops = {{"GatherND", make_kernel<GatherND>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
