// ScatterND (reduction none, add, mul; opset 18's max, min: the ai.onnx_amp ScatterND) on any
// element type: a copy of data, then each index tuple of indices[..., :k] writes (or combines) its
// slice of updates, in order — as ONNX's reference does, so a repeated index keeps the last write.
// Swin Transformer's shifted-window attention mask is built with it.
#include <cstring>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/scatter_reduction.h"

namespace amp::cpu {
namespace {

class ScatterND final : public Kernel {
 public:
  ScatterND(const Node& n, int64_t) : reduction_(scatter_reduction(n)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& data = io.input(0);
    const View& indices = io.input(1);
    const View& updates = io.input(2);
    View& out = io.output(0);
    if (indices.rank() == 0) throw InputError("ScatterND indices must have rank >= 1");
    const size_t k = static_cast<size_t>(indices.dims.back());
    if (k > data.rank()) throw InputError("ScatterND index tuples of " + std::to_string(k) + " exceed the data's rank");
    // updates must be indices.shape[:-1] + data.shape[k:].
    std::vector<int64_t> expect(indices.dims.begin(), indices.dims.end() - 1);
    expect.insert(expect.end(), data.dims.begin() + static_cast<int64_t>(k), data.dims.end());
    if (updates.dims != expect)
      throw InputError("ScatterND updates " + dims_str(updates.dims) + " should be " + dims_str(expect));
    if (data.nbytes()) std::memcpy(out.data, data.data, data.nbytes());
    const std::vector<int64_t> idx = read_ints(indices);
    const std::vector<int64_t> strides = strides_of(data.dims);
    const int64_t slice = product(data.dims, k), tuples = product(indices.dims, 0, indices.rank() - 1);
    dispatch(AllTypes{}, data.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = out.as<T>();
      const T* u = updates.as<T>();
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t at = 0;
        for (size_t j = 0; j < k; ++j) {
          int64_t i = idx[static_cast<size_t>(t) * k + j];
          const int64_t dim = data.dims[j];
          if (i < 0) i += dim;
          if (i < 0 || i >= dim)
            throw InputError("ScatterND index " + std::to_string(idx[static_cast<size_t>(t) * k + j]) + " is out of range for " +
                             std::to_string(dim));
          at += i * strides[j];
        }
        for (int64_t e = 0; e < slice; ++e) {
          T& dst = o[at + e];
          const T v = u[t * slice + e];
          scatter_combine(dst, v, reduction_);
        }
      }
    });
  }

 private:
  ScatterReduction reduction_;
};

}  // namespace

const std::vector<OpEntry>& scatter_nd_ops() {
  static const std::vector<OpEntry> ops = {{"ScatterND", make_kernel<ScatterND>, AllTypes::mask(), {}}};
  return ops;
}

const std::vector<OpEntry>& scatter_nd_opset18_ops() {
  static const std::vector<OpEntry> ops = {{"ScatterND", make_kernel<ScatterND>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
