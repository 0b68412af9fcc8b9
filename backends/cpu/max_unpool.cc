// MaxUnpool(X, I, output_shape): zeros with each X element written at its index in I, which counts
// over the whole flattened unpooled tensor (N and C included), as MaxPool's Indices do. That tensor
// is (in - 1) · stride - pads + kernel per spatial dim; an output_shape, when given, may be larger:
// the unpooled tensor then sits at its start (zeros after it in each dim), as ONNX Runtime and
// ONNX's node tests have it. A repeated index keeps the last write. It takes the float types.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class MaxUnpool final : public Kernel {
 public:
  MaxUnpool(const Node& n, int64_t)
      : kernel_(n.attr_ints("kernel_shape")), strides_(n.attr_ints("strides")), pads_(n.attr_ints("pads")) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View &x = io.input(0), &indices = io.input(1);
    View& out = io.output(0);
    if (indices.dims != x.dims)
      throw InputError("MaxUnpool's indices " + dims_str(indices.dims) + " must have X's shape " + dims_str(x.dims));
    // The unpooled tensor's dims, in which the indices count.
    std::vector<int64_t> dims = x.dims;
    const size_t spatial = x.rank() - 2;
    for (size_t d = 0; d < spatial && d < kernel_.size(); ++d) {
      const int64_t stride = strides_.empty() ? 1 : strides_[d], pad = pads_.empty() ? 0 : pads_[d] + pads_[d + spatial];
      dims[d + 2] = (x.dims[d + 2] - 1) * stride - pad + kernel_[d];
    }
    const bool same = dims == out.dims;
    if (!same && out.rank() != dims.size())
      throw InputError("MaxUnpool's output_shape " + dims_str(out.dims) + " does not match the unpooled " + dims_str(dims));
    const std::vector<int64_t> at = read_ints(indices), out_strides = strides_of(out.dims);
    const int64_t total = product(dims);
    const size_t esize = dtype_size(x.dtype);
    if (out.nbytes()) std::memset(out.data, 0, out.nbytes());
    const auto* src = static_cast<const uint8_t*>(x.data);
    auto* dst = static_cast<uint8_t*>(out.data);
    for (size_t k = 0; k < at.size(); ++k) {
      if (at[k] < 0 || at[k] >= total)
        throw InputError("MaxUnpool index " + std::to_string(at[k]) + " is out of range for an unpooled tensor " +
                         dims_str(dims));
      int64_t to = at[k];
      if (!same) {  // the index's coordinates in the unpooled tensor, placed in the output
        to = 0;
        for (size_t d = dims.size(), rest = static_cast<size_t>(at[k]); d-- > 0;) {
          const int64_t c = static_cast<int64_t>(rest % static_cast<size_t>(dims[d]));
          rest /= static_cast<size_t>(dims[d]);
          if (c >= out.dims[d])
            throw InputError("MaxUnpool index " + std::to_string(at[k]) + " falls outside the output_shape " + dims_str(out.dims));
          to += c * out_strides[d];
        }
      }
      std::memcpy(dst + static_cast<size_t>(to) * esize, src + k * esize, esize);
    }
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

}  // namespace

const std::vector<OpEntry>& max_unpool_ops() {
  static const std::vector<OpEntry> ops = {{"MaxUnpool", make_kernel<MaxUnpool>, FloatTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
