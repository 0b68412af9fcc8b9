// IsNaN and IsInf as device ops (float_class.cuh).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/float_class.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class FloatClass final : public CudaOp {
 public:
  FloatClass(const Node& n, int64_t) {
    test_.nan = n.op_type() == "IsNaN";
    test_.positive = n.attr_int("detect_positive", 1) != 0;
    test_.negative = n.attr_int("detect_negative", 1) != 0;
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16 && x.dtype != DType::kDouble)
      throw InputError(std::string(test_.nan ? "IsNaN" : "IsInf") + " takes float, float16, bfloat16 or double, not " +
                       std::string(dtype_name(x.dtype)));
    const FloatClassTest test = test_;
    const DType t = x.dtype;
    const int64_t n = x.numel();
    return std::make_unique<PreparedFunction>([test, t, n](const OpBuffers& b, DeviceContext& ctx) {
      float_class(t, test, b.in[0], static_cast<bool*>(b.out[0]), n, ctx.sm_count(), ctx.stream());
    });
  }

 private:
  FloatClassTest test_;
};

}  // namespace

const std::vector<CudaOpEntry>& float_class_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "IsNaN", make_op<FloatClass>}, {"", "IsInf", make_op<FloatClass>}};
  return ops;
}

}  // namespace amp::cuda
