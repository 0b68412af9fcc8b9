// The indexing ops of transformer exports and of the gradients autodiff emits for them
// (passes/autodiff/indexing_gradients.cc: CumSum's is a reversed CumSum, GatherElements' a
// ScatterElements with reduction add) as device ops: CumSum (cumsum.cuh), GatherElements and
// ScatterElements (gather_elements.cuh), GatherND (gather_nd.cuh), ReverseSequence
// (reverse_sequence.cuh). Shapes are checked while planning; indices and lengths are device
// data, read only by the kernels. CumSum's axis is read while planning (its entry's host input).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cumsum.cuh"
#include "backends/cuda/gather_elements.cuh"
#include "backends/cuda/gather_nd.cuh"
#include "backends/cuda/scatter_reduction.h"
#include "backends/cuda/reverse_sequence.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// The element types the CPU's indexing kernels take (every one but strings and complex numbers);
// they move whole elements of 1, 2, 4 or 8 bytes.
void require_element_type(const char* op, DType t) {
  if (t == DType::kUndefined || t == DType::kString || t == DType::kComplex64 || t == DType::kComplex128)
    throw InputError(std::string(op) + " does not take " + std::string(dtype_name(t)) + " tensors");
}

class CumSum final : public CudaOp {
 public:
  CumSum(const Node& n, int64_t) : exclusive_(n.attr_int("exclusive", 0) != 0), reverse_(n.attr_int("reverse", 0) != 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const Tensor* axis = s.host.size() > 1 ? s.host[1] : nullptr;
    if (!axis) throw InputError("CumSum's axis must be known before the run (a constant or a fed value, not computed on the device)");
    if (axis->numel() != 1) throw InputError("CumSum's axis must be a single integer");
    const TensorDesc& x = *s.in.at(0);
    const CumSumShape shape = cumsum_shape(x.dtype, x.dims, static_cast<int64_t>(axis->element(0)), exclusive_, reverse_);
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([shape, t](const OpBuffers& b, DeviceContext& ctx) {
      cumsum(t, shape, b.in[0], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  bool exclusive_, reverse_;
};

class GatherElements final : public CudaOp {
 public:
  GatherElements(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &data = *s.in.at(0), &indices = *s.in.at(1);
    require_element_type("GatherElements", data.dtype);
    const ElementsShape g = elements_shape("GatherElements", data.dims, indices.dims, axis_, data.dtype, indices.dtype);
    return std::make_unique<PreparedFunction>([g](const OpBuffers& b, DeviceContext& ctx) {
      gather_elements(g, b.in[0], b.in[1], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t axis_;
};

class ScatterElements final : public CudaOp {
 public:
  ScatterElements(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {
    reduction_ = scatter_reduction_code(n);
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &data = *s.in.at(0), &indices = *s.in.at(1), &updates = *s.in.at(2);
    if (updates.dims != indices.dims) throw InputError("ScatterElements updates must have the indices' shape");
    if (updates.dtype != data.dtype)
      throw InputError("ScatterElements updates are " + std::string(dtype_name(updates.dtype)) + " but the data is " +
                       std::string(dtype_name(data.dtype)));
    require_element_type("ScatterElements", data.dtype);
    ElementsShape g = elements_shape("ScatterElements", data.dims, indices.dims, axis_, data.dtype, indices.dtype);
    g.reduction = reduction_;
    return std::make_unique<PreparedFunction>([g](const OpBuffers& b, DeviceContext& ctx) {
      scatter_elements(g, b.in[0], b.in[1], b.in[2], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t axis_;
  int reduction_ = 0;
};

class GatherND final : public CudaOp {
 public:
  GatherND(const Node& n, int64_t) : batch_dims_(n.attr_int("batch_dims", 0)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &data = *s.in.at(0), &indices = *s.in.at(1);
    if (indices.dims.empty()) throw InputError("GatherND indices must have rank >= 1");
    require_element_type("GatherND", data.dtype);
    const GatherNDShape g = gather_nd_shape(data.dims, indices.dims, batch_dims_, data.dtype, indices.dtype);
    return std::make_unique<PreparedFunction>([g](const OpBuffers& b, DeviceContext& ctx) {
      gather_nd(g, b.in[0], static_cast<const int64_t*>(b.in[1]), b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t batch_dims_;
};

class ReverseSequence final : public CudaOp {
 public:
  ReverseSequence(const Node& n, int64_t) : time_axis_(n.attr_int("time_axis", 0)), batch_axis_(n.attr_int("batch_axis", 1)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &lens = *s.in.at(1);
    require_element_type("ReverseSequence", x.dtype);
    const ReverseSequenceShape r = reverse_sequence_shape(x.dims, time_axis_, batch_axis_, x.dtype, lens.dtype);
    if (lens.numel() != r.batch)
      throw InputError("ReverseSequence's sequence_lens has " + std::to_string(lens.numel()) + " values for a batch of " +
                       std::to_string(r.batch));
    return std::make_unique<PreparedFunction>([r](const OpBuffers& b, DeviceContext& ctx) {
      reverse_sequence(r, b.in[0], b.in[1], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t time_axis_, batch_axis_;
};

}  // namespace

const std::vector<CudaOpEntry>& indexing_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "CumSum", make_op<CumSum>, {1}},
      {"", "GatherElements", make_op<GatherElements>},
      {"", "ScatterElements", make_op<ScatterElements>},
      {kAmpDomain, "ScatterElements", make_op<ScatterElements>},
      {"", "GatherND", make_op<GatherND>},
      {"", "ReverseSequence", make_op<ReverseSequence>},
  };
  return ops;
}

}  // namespace amp::cuda
