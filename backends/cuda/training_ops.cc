// The ops a training step adds around the model: ai.onnx_amp AllFinite / AllFiniteScaled (the
// overflow check the optimizer and the loss scale read; all_finite.cu) and Dropout (dropout.cu). The optimizer update
// itself is standard elementwise ONNX (passes/training/optimizer.h) and runs as generated fused
// kernels, one multi-tensor launch per program for all parameters (schedule.h).
#include "backends/cuda/all_finite.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/dropout.cuh"
#include "backends/cuda/elementwise_codegen.h"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

bool is_device_float(DType t) { return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16; }

// AllFinite(inputs...) and AllFiniteScaled(scale, inputs...).
class AllFinite final : public CudaOp {
 public:
  AllFinite(const Node& n, int64_t) : scaled_(n.op_type() == "AllFiniteScaled") {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const size_t first = scaled_ ? 1 : 0;
    if (scaled_ && (!s.has_in(0) || s.in[0]->dtype != DType::kFloat || s.in[0]->numel() != 1))
      throw InputError("AllFiniteScaled's scale must be a float32 scalar");
    std::vector<CheckedTensor> tensors;
    std::vector<size_t> present;  // operand index of each checked tensor
    for (size_t i = first; i < s.in.size(); ++i)
      if (s.in[i]) {
        // Refused here rather than by the launcher inside a step (and a graph capture): the
        // kernel reads fp32, fp16 and bf16 only (a float64 gradient, which the CPU checks, is not).
        if (!is_device_float(s.in[i]->dtype))
          throw InputError("AllFinite checks float, float16 or bfloat16 tensors on cuda, not " +
                           std::string(dtype_name(s.in[i]->dtype)));
        tensors.push_back({s.in[i]->dtype, s.in[i]->numel()});
        present.push_back(i);
      }
    const bool scaled = scaled_;
    return std::make_unique<PreparedFunction>([tensors, present, scaled](const OpBuffers& b, DeviceContext& c) {
      std::vector<const void*> data;
      for (size_t i : present) data.push_back(b.in[i]);
      all_finite(tensors, data, scaled ? static_cast<const float*>(b.in[0]) : nullptr, static_cast<bool*>(b.out[0]),
                 c.sm_count(), c.stream());
    });
  }
  // Whether any element is inf or NaN does not depend on their order: a channels-last gradient
  // is checked as it is stored (channels_last.h).
  bool any_layout() const override { return true; }

 private:
  bool scaled_;
};

// Dropout(data, [ratio], [training_mode]) -> output, [mask]
class Dropout final : public CudaOp {
 public:
  Dropout(const Node& n, int64_t) : salt_(fnv1a64(n.output(0) ? n.output(0)->name() : n.name)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    auto scalar = [&](size_t i, double fallback) {
      if (!s.has_in(i)) return fallback;
      if (!s.host[i] || s.host[i]->numel() != 1)
        throw InputError("Dropout's ratio and training_mode must be scalars known before the run");
      return s.host[i]->element(0);
    };
    const float ratio = static_cast<float>(scalar(1, 0.5));
    const bool training = scalar(2, 0.0) != 0.0;
    const TensorDesc& x = *s.in[0];
    const int64_t n = x.numel();
    const DType t = x.dtype;
    const bool mask = s.has_out(1);
    const uint64_t salt = salt_;
    if (!training || ratio == 0.0f)
      return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
        if (n == 0) return;
        AMP_CUDA_CHECK(cudaMemcpyAsync(b.out[0], b.in[0], x.nbytes(), cudaMemcpyDeviceToDevice, c.stream()));
        if (mask) AMP_CUDA_CHECK(cudaMemsetAsync(b.out[1], 1, static_cast<size_t>(n), c.stream()));
      });
    if (ratio < 0.0f || ratio >= 1.0f) throw InputError("Dropout ratio must be in [0, 1)");
    if (!is_device_float(t)) throw InputError("training-mode Dropout takes float, float16 or bfloat16 on cuda, not " +
                                              std::string(dtype_name(t)));
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
      dropout_forward(t, b.in[0], b.out[0], mask ? static_cast<bool*>(b.out[1]) : nullptr, n, ratio, b.seed, salt,
                      c.sm_count(), c.stream());
    });
  }

 private:
  uint64_t salt_;  // distinct per node, so two Dropouts in one step draw different masks
};

}  // namespace

const std::vector<CudaOpEntry>& training_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {kAmpDomain, "AllFinite", make_op<AllFinite>},
      {kAmpDomain, "AllFiniteScaled", make_op<AllFinite>},
      {"", "Dropout", make_op<Dropout>},
  };
  return ops;
}

}  // namespace amp::cuda
