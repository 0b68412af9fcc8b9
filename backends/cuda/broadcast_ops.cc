// Mean and BitShift as device ops (mean.cuh, bit_shift.cuh): elementwise ops with broadcasting
// that the generated kernels cannot run (a division by the operand count after a variadic sum;
// shifts of unsigned integers wider than fp32 holds).
#include <string>

#include "backends/cuda/bit_shift.cuh"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/mean.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// The operands' dims, all of the output's type.
std::vector<std::vector<int64_t>> operand_dims(const char* op, const OpShapes& s) {
  std::vector<std::vector<int64_t>> dims;
  for (size_t k = 0; k < s.in.size(); ++k) {
    if (!s.has_in(k)) throw InputError(std::string(op) + "'s operands must all be present");
    if (s.in[k]->dtype != s.out.at(0)->dtype)
      throw InputError(std::string(op) + "'s operands must be of one type, not " + std::string(dtype_name(s.in[k]->dtype)) +
                       " and " + std::string(dtype_name(s.out[0]->dtype)));
    dims.push_back(s.in[k]->dims);
  }
  return dims;
}

class Mean final : public CudaOp {
 public:
  Mean(const Node&, int64_t) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const DType t = s.out.at(0)->dtype;
    if (t != DType::kFloat && t != DType::kFloat16 && t != DType::kBFloat16 && t != DType::kDouble)
      throw InputError("Mean takes float, float16, bfloat16 or double, not " + std::string(dtype_name(t)));
    const BroadcastOperands b = broadcast_operands("Mean", s.out[0]->dims, operand_dims("Mean", s));
    return std::make_unique<PreparedFunction>([t, b](const OpBuffers& buf, DeviceContext& ctx) {
      mean(t, b, buf.in, buf.out[0], ctx.sm_count(), ctx.stream());
    });
  }
};

class BitShift final : public CudaOp {
 public:
  BitShift(const Node& n, int64_t) {
    const std::string direction = n.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      throw InputError("direction is '" + direction + "'; BitShift takes LEFT or RIGHT");
    left_ = direction == "LEFT";
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const DType t = s.out.at(0)->dtype;
    if (t != DType::kUInt8 && t != DType::kUInt16 && t != DType::kUInt32 && t != DType::kUInt64)
      throw InputError("BitShift takes uint8, uint16, uint32 or uint64, not " + std::string(dtype_name(t)));
    if (s.in.size() != 2) throw InputError("BitShift takes two operands");
    const BroadcastOperands b = broadcast_operands("BitShift", s.out[0]->dims, operand_dims("BitShift", s));
    const bool left = left_;
    return std::make_unique<PreparedFunction>([t, b, left](const OpBuffers& buf, DeviceContext& ctx) {
      bit_shift(t, left, b, buf.in[0], buf.in[1], buf.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  bool left_ = true;
};

}  // namespace

const std::vector<CudaOpEntry>& broadcast_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Mean", make_op<Mean>}, {"", "BitShift", make_op<BitShift>}};
  return ops;
}

}  // namespace amp::cuda
