// LRN as a device op (lrn.cuh).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/lrn.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class Lrn final : public CudaOp {
 public:
  Lrn(const Node& n, int64_t)
      : size_(n.attr_int("size", 0)), alpha_(n.attr_float("alpha", 1e-4f)), beta_(n.attr_float("beta", 0.75f)),
        bias_(n.attr_float("bias", 1.0f)) {
    if (size_ <= 0) throw InputError("LRN needs a positive 'size'");
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    const LrnShape shape = lrn_shape(x.dims, size_, alpha_, beta_, bias_);
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([shape, t](const OpBuffers& buf, DeviceContext& ctx) {
      lrn(t, shape, buf.in[0], buf.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
};

}  // namespace

const std::vector<CudaOpEntry>& lrn_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "LRN", make_op<Lrn>}};
  return ops;
}

}  // namespace amp::cuda
