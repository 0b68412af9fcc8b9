// Equal, Less, LessOrEqual, Greater and GreaterOrEqual of int32 and int64 tensors on the device
// (int_compare.cuh). The schedule asks for these only for a comparison a generated kernel cannot
// run (is_fusable_node: float, float16, bfloat16 and bool operands fuse, compared in fp32); the
// rest of the float types and the other integer widths stay refused here by type, node and op.
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/int_compare.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <IntComparison Op>
class IntCompare final : public CudaOp {
 public:
  IntCompare(const Node& n, int64_t) : op_type_(n.op_type()) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& a = *s.in.at(0);
    const TensorDesc& b = *s.in.at(1);
    if (a.dtype != b.dtype)
      throw InputError(op_type_ + " compares operands of one type, not " + std::string(dtype_name(a.dtype)) + " and " +
                       std::string(dtype_name(b.dtype)));
    if (a.dtype != DType::kInt32 && a.dtype != DType::kInt64)
      throw InputError(op_type_ + " of " + std::string(dtype_name(a.dtype)) +
                       " tensors does not run on the device (int32 and int64 compare in a kernel of their own; "
                       "float, float16, bfloat16 and bool in generated elementwise kernels)");
    if (s.out.at(0)->dtype != DType::kBool)
      throw InputError(op_type_ + " writes bool, not " + std::string(dtype_name(s.out[0]->dtype)));
    const IntCompareShape shape = int_compare_shape(Op, a.dtype, a.dims, b.dims);
    return std::make_unique<PreparedFunction>([shape](const OpBuffers& buf, DeviceContext& ctx) {
      int_compare(shape, buf.in[0], buf.in[1], static_cast<bool*>(buf.out[0]), ctx.sm_count(), ctx.stream());
    });
  }

 private:
  std::string op_type_;
};

}  // namespace

const std::vector<CudaOpEntry>& int_compare_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "Equal", make_op<IntCompare<IntComparison::kEqual>>},
      {"", "Less", make_op<IntCompare<IntComparison::kLess>>},
      {"", "LessOrEqual", make_op<IntCompare<IntComparison::kLessOrEqual>>},
      {"", "Greater", make_op<IntCompare<IntComparison::kGreater>>},
      {"", "GreaterOrEqual", make_op<IntCompare<IntComparison::kGreaterOrEqual>>},
  };
  return ops;
}

}  // namespace amp::cuda
