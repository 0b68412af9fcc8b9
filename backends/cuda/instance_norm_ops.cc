// InstanceNormalization and MeanVarianceNormalization as device ops (instance_norm.cuh).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/instance_norm.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

void require_float(DType t, const char* op) {
  if (t != DType::kFloat && t != DType::kFloat16 && t != DType::kBFloat16)
    throw InputError(std::string(op) + " on cuda takes float, float16 or bfloat16, not " + std::string(dtype_name(t)));
}

class InstanceNorm final : public CudaOp {
 public:
  InstanceNorm(const Node& n, int64_t) : epsilon_(n.attr_float("epsilon", 1e-5f)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    require_float(x.dtype, "InstanceNormalization");
    const InstanceNormShape shape = instance_norm_shape(x.dims, epsilon_);
    for (size_t k : {size_t{1}, size_t{2}}) {
      if (!s.has_in(k)) throw InputError("InstanceNormalization needs its scale and B inputs");
      if (s.in[k]->dtype != x.dtype || s.in[k]->numel() != shape.channels)
        throw InputError(std::string(k == 1 ? "scale" : "B") + " must be [C] of the input's type");
    }
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([shape, t](const OpBuffers& b, DeviceContext& ctx) {
      instance_norm(t, shape, b.in[0], b.in[1], b.in[2], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  float epsilon_;
};

class MeanVarianceNorm final : public CudaOp {
 public:
  MeanVarianceNorm(const Node& n, int64_t) : axes_(n.attr_ints("axes", {0, 2, 3})) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& x = *s.in.at(0);
    require_float(x.dtype, "MeanVarianceNormalization");
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    std::vector<bool> reduced(x.dims.size(), false);
    for (int64_t a : axes_) {
      if (a < -rank || a >= rank) throw InputError("axis " + std::to_string(a) + " is out of range");
      reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    }
    const AxisGroups groups = axis_groups(x.dims, reduced);
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([groups, t](const OpBuffers& b, DeviceContext& ctx) {
      mean_variance_norm(t, groups, b.in[0], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

const std::vector<CudaOpEntry>& instance_norm_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "InstanceNormalization", make_op<InstanceNorm>},
                                               {"", "MeanVarianceNormalization", make_op<MeanVarianceNorm>}};
  return ops;
}

}  // namespace amp::cuda
