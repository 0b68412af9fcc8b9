// QuantizeLinear and DequantizeLinear as device ops (quantize.cuh).
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/quantize.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class QuantizeLinear final : public CudaOp {
 public:
  QuantizeLinear(const Node& n, int64_t) : axis_(n.attr_int("axis", 1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const QuantShape q = quant_shape(s.in.at(0)->dims, s.in.at(1)->dims, axis_);
    const DType x = s.in[0]->dtype, scale = s.in[1]->dtype, y = s.out.at(0)->dtype;
    if (s.has_in(2) && s.in[2]->dtype != y)
      throw InputError("the zero point is " + std::string(dtype_name(s.in[2]->dtype)) + " but the output is " +
                       std::string(dtype_name(y)));
    const bool zp = s.has_in(2);
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& ctx) {
      quantize_linear(x, scale, y, q, b.in[0], b.in[1], zp ? b.in[2] : nullptr, b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t axis_;
};

class DequantizeLinear final : public CudaOp {
 public:
  DequantizeLinear(const Node& n, int64_t) : axis_(n.attr_int("axis", 1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const QuantShape q = quant_shape(s.in.at(0)->dims, s.in.at(1)->dims, axis_);
    const DType x = s.in[0]->dtype, scale = s.in[1]->dtype;
    if (s.has_in(2) && s.in[2]->dtype != x)
      throw InputError("the zero point is " + std::string(dtype_name(s.in[2]->dtype)) + " but the input is " +
                       std::string(dtype_name(x)));
    const bool zp = s.has_in(2);
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& ctx) {
      dequantize_linear(x, scale, q, b.in[0], b.in[1], zp ? b.in[2] : nullptr, b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<CudaOpEntry>& quantize_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "QuantizeLinear", make_op<QuantizeLinear>},
                                               {"", "DequantizeLinear", make_op<DequantizeLinear>}};
  return ops;
}

}  // namespace amp::cuda
