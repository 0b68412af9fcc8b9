// ScatterND on the device (scatter_nd.cuh): the shapes checked while planning as the CPU kernel
// checks them at run time; the indices are device data, read only by the kernels.
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/scatter_nd.cuh"
#include "backends/cuda/scatter_reduction.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

class ScatterND final : public CudaOp {
 public:
  ScatterND(const Node& n, int64_t) {
    reduction_ = scatter_reduction_code(n);
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& data = *s.in[0];
    const TensorDesc& indices = *s.in[1];
    const TensorDesc& updates = *s.in[2];
    if (indices.dims.empty()) throw InputError("ScatterND indices must have rank >= 1");
    if (indices.dtype != DType::kInt64)
      throw InputError("ScatterND indices must be int64, not " + std::string(dtype_name(indices.dtype)));
    if (updates.dtype != data.dtype)
      throw InputError("ScatterND updates are " + std::string(dtype_name(updates.dtype)) + " but the data is " +
                       std::string(dtype_name(data.dtype)));
    const int64_t k = indices.dims.back();
    if (k < 0 || static_cast<size_t>(k) > data.dims.size())
      throw InputError("ScatterND index tuples of " + std::to_string(k) + " exceed the data's rank");
    if (k > kMaxScatterNDIndex)
      throw InputError("ScatterND index tuples of " + std::to_string(k) + " are not supported on the GPU (at most " +
                       std::to_string(kMaxScatterNDIndex) + ")");
    std::vector<int64_t> expect(indices.dims.begin(), indices.dims.end() - 1);
    expect.insert(expect.end(), data.dims.begin() + k, data.dims.end());
    if (updates.dims != expect)
      throw InputError("ScatterND updates " + dims_text(updates.dims) + " should be " + dims_text(expect));
    ScatterNDShape g;
    g.k = static_cast<int>(k);
    g.reduction = reduction_;
    g.type = data.dtype;
    g.elem_bytes = dtype_size(data.dtype);
    g.tuples = 1;
    for (size_t j = 0; j + 1 < indices.dims.size(); ++j) g.tuples *= indices.dims[j];
    g.slice = 1;
    for (size_t j = static_cast<size_t>(k); j < data.dims.size(); ++j) g.slice *= data.dims[j];
    g.slots = 1;
    for (int64_t j = k; j-- > 0;) {
      g.dims[j] = data.dims[static_cast<size_t>(j)];
      g.strides[j] = g.slots;
      g.slots *= g.dims[j];
    }
    if (g.tuples > INT32_MAX) throw InputError("ScatterND with more than 2^31 index tuples is not supported on the GPU");
    return std::make_unique<PreparedFunction>(
        [g](const OpBuffers& b, DeviceContext& ctx) {
          scatter_nd(g, b.in[0], static_cast<const int64_t*>(b.in[1]), b.in[2], b.out[0], b.workspace, ctx.sm_count(),
                     ctx.stream());
        },
        scatter_nd_workspace(g));
  }

 private:
  int reduction_ = 0;
};

}  // namespace

const std::vector<CudaOpEntry>& scatter_nd_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "ScatterND", make_op<ScatterND>},
                                               {kAmpDomain, "ScatterND", make_op<ScatterND>}};
  return ops;
}

}  // namespace amp::cuda
