// ai.onnx_amp Attention and AttentionGrad on the device: the fallback kernels of attention.cu for
// every type and shape they take (d and dv up to 128). Masks: none, is_causal, bool or float,
// broadcast to the scores; a float mask's gradient is not computed on the device (the plan refuses
// it, naming the node).
#include <cmath>
#include <optional>

#include "backends/cuda/attention.cuh"
#include "backends/cuda/cuda_op.h"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// The kernels' view of Q [..., Tq, d], K [..., Tk, d], V [..., Tk, dv] and the mask.
AttentionShape attention_shape(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v, const TensorDesc* mask,
                               const std::optional<float>& scale, bool causal) {
  const size_t r = q.dims.size();
  if (r < 2 || k.dims.size() != r || v.dims.size() != r) throw InputError("Q, K and V must have one rank >= 2");
  if (r - 2 > static_cast<size_t>(AttentionShape::kMaxLead))
    throw InputError("at most " + std::to_string(AttentionShape::kMaxLead) + " leading dims on cuda");
  if (k.dtype != q.dtype || v.dtype != q.dtype) throw InputError("Q, K and V must share one type");
  AttentionShape s;
  s.lead = static_cast<int>(r - 2);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (k.dims[i] != q.dims[i] || v.dims[i] != q.dims[i]) throw InputError("Q, K and V must have equal leading dims");
    s.lead_dims[i] = q.dims[i];
    s.batch *= q.dims[i];
  }
  s.tq = q.dims[r - 2];
  s.d = q.dims[r - 1];
  s.tk = k.dims[r - 2];
  s.dv = v.dims[r - 1];
  if (k.dims[r - 1] != s.d || v.dims[r - 2] != s.tk) throw InputError("K must be [..., Tk, d] and V [..., Tk, dv]");
  if (s.d > AttentionShape::kMaxHead || s.dv > AttentionShape::kMaxHead)
    throw InputError("head sizes above " + std::to_string(AttentionShape::kMaxHead) + " are not supported on cuda");
  s.scale = scale ? *scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d)));
  s.causal = causal ? 1 : 0;
  if (!mask) return s;
  if (mask->dtype != DType::kBool && mask->dtype != DType::kFloat && mask->dtype != DType::kFloat16 &&
      mask->dtype != DType::kBFloat16)
    throw InputError("attn_mask must be bool, float, float16 or bfloat16 on cuda");
  s.mask_type = mask->dtype;
  const size_t mr = mask->dims.size();
  if (mr > r) throw InputError("the mask's rank exceeds the scores'");
  std::vector<int64_t> scores = q.dims;
  scores[r - 1] = s.tk;
  std::vector<int64_t> stride(r, 0);
  int64_t step = 1;
  for (size_t i = 0; i < mr; ++i) {
    const size_t m = mr - 1 - i, a = r - 1 - i;
    if (mask->dims[m] != 1 && mask->dims[m] != scores[a]) throw InputError("the mask does not broadcast to the scores");
    if (mask->dims[m] != 1) stride[a] = step;
    step *= mask->dims[m];
  }
  for (size_t a = 0; a + 2 < r; ++a) s.mask_lead_stride[a] = stride[a];
  s.mask_row = stride[r - 2];
  s.mask_col = stride[r - 1];
  return s;
}

std::optional<float> scale_attribute(const Node& n) {
  return n.attr("scale") ? std::optional<float>(n.attr_float("scale", 1.0f)) : std::nullopt;
}

// Attention(Q, K, V, [attn_mask]) -> Y, [LSE]
class Attention final : public CudaOp {
 public:
  Attention(const Node& n, int64_t) : scale_(scale_attribute(n)), causal_(n.attr_int("is_causal", 0) != 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const AttentionShape shape =
        attention_shape(*s.in[0], *s.in[1], *s.in[2], s.has_in(3) ? s.in[3] : nullptr, scale_, causal_);
    if (s.out[0]->dtype != s.in[0]->dtype) throw InputError("Y must be of Q's type");
    if (s.has_out(1) && s.out[1]->dtype != DType::kFloat) throw InputError("LSE is float32 on cuda");
    const DType t = s.in[0]->dtype;
    const bool masked = s.has_in(3), lse = s.has_out(1);
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& c) {
      attention_forward(t, b.in[0], b.in[1], b.in[2], masked ? b.in[3] : nullptr, b.out[0],
                        lse ? static_cast<float*>(b.out[1]) : nullptr, shape, c.stream());
    });
  }

 private:
  std::optional<float> scale_;
  bool causal_;
};

// AttentionGrad(dY, Q, K, V, Y, LSE, [attn_mask]) -> [dQ], [dK], [dV]
class AttentionGrad final : public CudaOp {
 public:
  AttentionGrad(const Node& n, int64_t) : scale_(scale_attribute(n)), causal_(n.attr_int("is_causal", 0) != 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const AttentionShape shape =
        attention_shape(*s.in[1], *s.in[2], *s.in[3], s.has_in(6) ? s.in[6] : nullptr, scale_, causal_);
    if (s.has_out(3)) throw InputError("the gradient of a float attn_mask is computed on the cpu backend only");
    if (s.in[0]->dtype != s.in[1]->dtype || s.in[4]->dtype != s.in[1]->dtype) throw InputError("dY and Y must be of Q's type");
    if (s.in[5]->dtype != DType::kFloat) throw InputError("LSE is float32 on cuda");
    const DType t = s.in[1]->dtype;
    const bool masked = s.has_in(6), dq = s.has_out(0), dk = s.has_out(1), dv = s.has_out(2);
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          attention_backward(t, b.in[0], b.in[1], b.in[2], b.in[3], b.in[4], static_cast<const float*>(b.in[5]),
                             masked ? b.in[6] : nullptr, dq ? b.out[0] : nullptr, dk ? b.out[1] : nullptr,
                             dv ? b.out[2] : nullptr, shape, b.workspace, c.stream());
        },
        attention_backward_workspace(shape));
  }

 private:
  std::optional<float> scale_;
  bool causal_;
};

}  // namespace

const std::vector<CudaOpEntry>& attention_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {kAmpDomain, "Attention", make_op<Attention>},
      {kAmpDomain, "AttentionGrad", make_op<AttentionGrad>},
  };
  return ops;
}

}  // namespace amp::cuda
