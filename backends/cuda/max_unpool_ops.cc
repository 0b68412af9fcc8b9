// MaxUnpool as a device op (max_unpool.cuh). An output_shape input decides Y's dims while planning;
// the op reads them from the plan's output.
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/max_unpool.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class MaxUnpool final : public CudaOp {
 public:
  MaxUnpool(const Node& n, int64_t)
      : kernel_(n.attr_ints("kernel_shape")), strides_(n.attr_ints("strides")), pads_(n.attr_ints("pads")) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &indices = *s.in.at(1);
    if (indices.dtype != DType::kInt64) throw InputError("MaxUnpool's indices must be int64");
    const MaxUnpoolShape shape =
        max_unpool_shape(x.dtype, x.dims, indices.dims, s.out.at(0)->dims, kernel_, strides_, pads_);
    return std::make_unique<PreparedFunction>(
        [shape](const OpBuffers& b, DeviceContext& ctx) {
          max_unpool(shape, b.in[0], static_cast<const int64_t*>(b.in[1]), b.out[0], b.workspace, ctx.sm_count(),
                     ctx.stream());
        },
        max_unpool_workspace(shape));
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

}  // namespace

const std::vector<CudaOpEntry>& max_unpool_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "MaxUnpool", make_op<MaxUnpool>}};
  return ops;
}

}  // namespace amp::cuda
