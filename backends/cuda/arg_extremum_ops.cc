// ArgMax, ArgMin and Hardmax as device ops (arg_extremum.cuh).
#include "backends/cuda/arg_extremum.cuh"
#include "backends/cuda/cuda_op.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class ArgExtremum final : public CudaOp {
 public:
  ArgExtremum(const Node& n, int64_t)
      : max_(n.op_type() == "ArgMax"), axis_(n.attr_int("axis", 0)), last_(n.attr_int("select_last_index", 0) != 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16)
      throw InputError(std::string(max_ ? "ArgMax" : "ArgMin") + " on cuda takes float, float16 or bfloat16, not " +
                       std::string(dtype_name(x.dtype)));
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    if (rank == 0) throw InputError("X must have a rank of at least 1");
    if (axis_ < -rank || axis_ >= rank) throw InputError("axis " + std::to_string(axis_) + " is out of range");
    const size_t a = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    ArgExtremumShape shape;
    shape.max = max_;
    shape.last = last_;
    shape.r = x.dims[a];
    for (size_t d = 0; d < a; ++d) shape.outer *= x.dims[d];
    for (size_t d = a + 1; d < x.dims.size(); ++d) shape.inner *= x.dims[d];
    if (shape.r == 0 && shape.outer * shape.inner > 0) throw InputError("the axis is empty: there is no extremum to index");
    if (x.row_pitch) {
      if (shape.inner != 1) throw Error("internal: ArgMax over padded rows along another axis than the last");
      shape.pitch = x.row_pitch;
    }
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([shape, t](const OpBuffers& b, DeviceContext& c) {
      arg_extremum(t, shape, b.in[0], static_cast<int64_t*>(b.out[0]), c.stream());
    });
  }
  // Over the last axis a block reads each row from where it starts: a language model's scores
  // may be stored with padded rows (row_pitch.h).
  bool takes_row_pitch(const OpShapes& s, bool output, size_t operand) const override {
    if (output || operand != 0 || !s.has_in(0)) return false;
    const int64_t rank = static_cast<int64_t>(s.in[0]->dims.size());
    return rank >= 1 && (axis_ == -1 || axis_ == rank - 1);
  }

 private:
  bool max_;
  int64_t axis_;
  bool last_;
};

// Hardmax: ArgMax's indices (first largest, a NaN the largest) into the workspace, then a one-hot
// pass over the output.
class Hardmax final : public CudaOp {
 public:
  Hardmax(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16)
      throw InputError("Hardmax on cuda takes float, float16 or bfloat16, not " + std::string(dtype_name(x.dtype)));
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    if (rank == 0) throw InputError("Hardmax needs an input of rank >= 1");
    if (axis_ < -rank || axis_ >= rank) throw InputError("axis " + std::to_string(axis_) + " is out of range");
    const size_t a = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    ArgExtremumShape shape;
    shape.r = x.dims[a];
    for (size_t d = 0; d < a; ++d) shape.outer *= x.dims[d];
    for (size_t d = a + 1; d < x.dims.size(); ++d) shape.inner *= x.dims[d];
    const DType t = x.dtype;
    const bool empty = x.numel() == 0;  // an empty axis too: nothing to mark
    return std::make_unique<PreparedFunction>(
        [shape, t, empty](const OpBuffers& b, DeviceContext& c) {
          if (empty) return;
          int64_t* at = static_cast<int64_t*>(b.workspace);
          arg_extremum(t, shape, b.in[0], at, c.stream());
          one_hot_at(t, shape, at, b.out[0], c.sm_count(), c.stream());
        },
        static_cast<size_t>(shape.outer * shape.inner) * sizeof(int64_t));
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<CudaOpEntry>& arg_extremum_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "ArgMax", make_op<ArgExtremum>}, {"", "ArgMin", make_op<ArgExtremum>}, {"", "Hardmax", make_op<Hardmax>}};
  return ops;
}

}  // namespace amp::cuda
