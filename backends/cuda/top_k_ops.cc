// TopK as a device op (top_k.cuh). K (input 1 from opset 10, the attribute k before) decides the
// outputs' shapes, so it is read on the host while planning: a constant, or computed from shapes.
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/top_k.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class TopK final : public CudaOp {
 public:
  TopK(const Node& n, int64_t opset)
      : axis_(n.attr_int("axis", -1)), largest_(n.attr_int("largest", 1) != 0), k_input_(opset >= 10),
        k_attr_(n.attr_int("k", -1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    int64_t k = k_attr_;
    if (k_input_) {
      const Tensor* kt = s.host.size() > 1 ? s.host[1] : nullptr;
      if (!kt) throw InputError("TopK's K must be known before the run (a constant or computed from shapes)");
      if (kt->numel() != 1) throw InputError("TopK's K must hold one value");
      k = static_cast<int64_t>(kt->element(0));
    }
    const TopKShape shape = top_k_shape(x.dims, axis_, k, largest_);
    const DType t = x.dtype;
    const bool indices = s.has_out(1);
    return std::make_unique<PreparedFunction>([shape, t, indices](const OpBuffers& b, DeviceContext& ctx) {
      top_k(t, shape, b.in[0], b.out[0], indices ? static_cast<int64_t*>(b.out[1]) : nullptr, ctx.sm_count(),
            ctx.stream());
    });
  }

 private:
  int64_t axis_;
  bool largest_, k_input_;
  int64_t k_attr_;
};

}  // namespace

const std::vector<CudaOpEntry>& top_k_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "TopK", make_op<TopK>}};
  return ops;
}

}  // namespace amp::cuda
