// Mean, BitShift and the bitwise ops (opset 18's BitwiseAnd, Or, Xor, Not: ai.onnx_amp after the
// import) as device ops (mean.cuh, bit_shift.cuh, bitwise.cuh): elementwise ops with broadcasting
// that the generated kernels cannot run (a division by the operand count after a variadic sum;
// shifts and bit operations of integers wider than fp32 holds).
#include <algorithm>
#include <iterator>
#include <string>

#include "backends/cuda/bit_shift.cuh"
#include "backends/cuda/bitwise.cuh"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/mean.cuh"
#include "graph/amp_ops.h"
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

template <BitwiseOp kOp>
class Bitwise final : public CudaOp {
 public:
  Bitwise(const Node& n, int64_t) : op_(n.op_type()) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const DType t = s.out.at(0)->dtype;
    static const DType integers[] = {DType::kInt8,  DType::kInt16,  DType::kInt32,  DType::kInt64,
                                     DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
    if (std::find(std::begin(integers), std::end(integers), t) == std::end(integers))
      throw InputError(op_ + " takes integer tensors, not " + std::string(dtype_name(t)));
    const size_t operands = kOp == BitwiseOp::kNot ? 1 : 2;
    if (s.in.size() != operands) throw InputError(op_ + " takes " + std::to_string(operands) + " operand(s)");
    const BroadcastOperands b = broadcast_operands(op_.c_str(), s.out[0]->dims, operand_dims(op_.c_str(), s));
    return std::make_unique<PreparedFunction>([t, b](const OpBuffers& buf, DeviceContext& ctx) {
      const void* y = kOp == BitwiseOp::kNot ? nullptr : buf.in[1];
      bitwise(kOp, t, b, buf.in[0], y, buf.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  std::string op_;
};

}  // namespace

const std::vector<CudaOpEntry>& broadcast_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Mean", make_op<Mean>},
                                               {"", "BitShift", make_op<BitShift>},
                                               {kAmpDomain, "BitwiseAnd", make_op<Bitwise<BitwiseOp::kAnd>>},
                                               {kAmpDomain, "BitwiseOr", make_op<Bitwise<BitwiseOp::kOr>>},
                                               {kAmpDomain, "BitwiseXor", make_op<Bitwise<BitwiseOp::kXor>>},
                                               {kAmpDomain, "BitwiseNot", make_op<Bitwise<BitwiseOp::kNot>>}};
  return ops;
}

}  // namespace amp::cuda
