// ai.onnx_amp Attention and AttentionGrad on the device: cuDNN's fused flash attention
// (cudnn_attention.h) for fp16 and bf16 where cuDNN finalises a plan for the shape, else the
// fallback kernels of attention.cu (every type, d and dv up to 128). Masks: none, is_causal, bool
// or float, broadcast to the scores; cuDNN gets a mask as an additive bias of Q's type (a bool
// mask converted into the op's workspace first), broadcast as [b or 1, h or 1, Tq or 1, Tk or 1]
// over the leading dims read as b x h. A float mask's gradient is not computed on the device (the
// plan refuses it, naming the node). Each unit records in the device report which ran and, for
// the fallback, why cuDNN's did not; AMP_CUDNN_ATTENTION=0 asks for the fallback.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "backends/cuda/attention.cuh"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_attention.h"
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

// One plan (or refusal) per shape for the device context: GPT-2's 12 layers share theirs, and a
// real cuDNN compiles each fused plan's kernels when it finalises it (seconds, not microseconds).
struct AttentionPlans {
  using Key = std::tuple<bool, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, bool,
                         std::vector<int64_t>>;
  std::mutex mutex;
  std::map<Key, std::pair<std::shared_ptr<const CudnnAttention>, std::string>> plans;
};

std::shared_ptr<const CudnnAttention> cached_plan(const CudnnAttentionShape& s, bool backward, DeviceContext& ctx,
                                                  std::string* why) {
  const std::shared_ptr<void> slot =
      ctx.unit_cache("attention", [] { return std::static_pointer_cast<void>(std::make_shared<AttentionPlans>()); });
  AttentionPlans& cache = *static_cast<AttentionPlans*>(slot.get());
  const AttentionPlans::Key key{backward, static_cast<int>(s.type), s.b, s.h, s.sq, s.skv, s.d, s.dv, s.scale,
                                s.causal, s.bias_dims};
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    std::string refusal;
    std::shared_ptr<const CudnnAttention> plan = CudnnAttention::build(s, backward, ctx.cudnn(), &refusal);
    it = cache.plans.emplace(key, std::make_pair(std::move(plan), std::move(refusal))).first;
  }
  *why = it->second.second;
  return it->second.first;
}

// cuDNN's plan for these operands, or null with *why (recorded by the caller).
struct FusedAttention {
  std::shared_ptr<const CudnnAttention> plan;
  CudnnAttentionShape shape;
  int64_t bias_elements = 0;  // a mask converted into the workspace first, else 0
  DType mask_type = DType::kUndefined;
  bool mask_rows = true, mask_cols = true;  // whether the mask varies over queries, over keys
  size_t bias_bytes = 0, lse_bytes = 0;
};

std::optional<FusedAttention> fused_attention(const AttentionShape& a, DType t, const TensorDesc* mask, bool backward,
                                              DeviceContext& ctx, std::string* why) {
  const char* off = std::getenv("AMP_CUDNN_ATTENTION");
  if (off && std::strcmp(off, "0") == 0) {
    *why = "AMP_CUDNN_ATTENTION=0";
    return std::nullopt;
  }
  if (t != DType::kFloat16 && t != DType::kBFloat16) {
    *why = "cuDNN's fused attention takes fp16 and bf16, not " + std::string(dtype_name(t));
    return std::nullopt;
  }
  FusedAttention f;
  CudnnAttentionShape& s = f.shape;
  s.type = t;
  s.h = a.lead ? a.lead_dims[a.lead - 1] : 1;
  s.b = a.lead ? a.batch / s.h : 1;
  s.sq = a.tq;
  s.skv = a.tk;
  s.d = a.d;
  s.dv = a.dv;
  s.scale = a.scale;
  s.causal = a.causal != 0;
  if (mask) {
    // The leading dims but the last are cuDNN's b: the mask must cover all of them or none.
    bool any = false, all = true;
    for (int i = 0; i + 1 < a.lead; ++i) {
      if (a.mask_lead_stride[i]) {
        any = true;
      } else {
        all = false;
      }
    }
    if (any && !all) {
      *why = "the mask is broadcast over some of the batch dims but not all (cuDNN's bias is [b or 1, h or 1, ...])";
      return std::nullopt;
    }
    const bool over_b = a.lead > 1 && any, over_h = a.lead > 0 && a.mask_lead_stride[a.lead - 1] != 0;
    // The bias is given in full over [queries, keys]: on an H100 (cuDNN 9.19) the backward graph
    // computed wrong gradients from a key-padding bias [b, 1, 1, keys] broadcast over the queries,
    // where the forward was right; so a mask broadcast over queries or keys is expanded first.
    s.bias_dims = {over_b ? s.b : 1, over_h ? s.h : 1, s.sq, s.skv};
    f.mask_type = mask->dtype;
    f.mask_rows = a.mask_row != 0;
    f.mask_cols = a.mask_col != 0;
    const int64_t outer = s.bias_dims[0] * s.bias_dims[1];
    if (outer * (f.mask_rows ? s.sq : 1) * (f.mask_cols ? s.skv : 1) != mask->numel()) {
      *why = "the mask has " + std::to_string(mask->numel()) + " elements, not those of [b or 1, h or 1, queries or 1, keys or 1]";
      return std::nullopt;
    }
    if (mask->dtype != t || !f.mask_rows || !f.mask_cols) {
      f.bias_elements = outer * s.sq * s.skv;
      f.bias_bytes = workspace_aligned(static_cast<size_t>(f.bias_elements) * dtype_size(t));
    }
  }
  f.plan = cached_plan(s, backward, ctx, why);
  if (!f.plan) return std::nullopt;
  return f;
}

void record(DeviceContext& ctx, const char* direction, const std::optional<FusedAttention>& f, const std::string& why) {
  if (f) {
    ctx.report().record("attention", {{"direction", direction}, {"ran", "cudnn"}, {"engine", f->plan->engine()},
                                      {"workspace_bytes", std::to_string(f->plan->workspace_bytes())}});
  } else {
    ctx.report().record("attention", {{"direction", direction}, {"ran", "fallback"}, {"why", why}});
  }
}

// The mask as cuDNN's bias: the mask itself when it is of Q's type, else converted into `scratch`.
const void* bias_of(const FusedAttention& f, const void* mask, void* scratch, cudaStream_t stream) {
  if (!mask || f.bias_elements == 0) return mask;
  const CudnnAttentionShape& s = f.shape;
  attention_mask_bias(f.mask_type, mask, s.type, scratch, s.bias_dims[0] * s.bias_dims[1], s.sq, s.skv, f.mask_rows,
                      f.mask_cols, stream);
  return scratch;
}

// Attention(Q, K, V, [attn_mask]) -> Y, [LSE]
class Attention final : public CudaOp {
 public:
  Attention(const Node& n, int64_t) : scale_(scale_attribute(n)), causal_(n.attr_int("is_causal", 0) != 0) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const AttentionShape shape =
        attention_shape(*s.in[0], *s.in[1], *s.in[2], s.has_in(3) ? s.in[3] : nullptr, scale_, causal_);
    if (s.out[0]->dtype != s.in[0]->dtype) throw InputError("Y must be of Q's type");
    if (s.has_out(1) && s.out[1]->dtype != DType::kFloat) throw InputError("LSE is float32 on cuda");
    const DType t = s.in[0]->dtype;
    const bool masked = s.has_in(3), lse = s.has_out(1);
    std::string why;
    std::optional<FusedAttention> fused = fused_attention(shape, t, masked ? s.in[3] : nullptr, false, ctx, &why);
    record(ctx, "forward", fused, why);
    if (fused) {
      auto f = std::make_shared<FusedAttention>(std::move(*fused));
      // Without an LSE output, cuDNN's Stats still need a place: the workspace.
      f->lse_bytes = lse ? 0 : workspace_aligned(static_cast<size_t>(shape.batch * shape.tq) * sizeof(float));
      const size_t plan_bytes = workspace_aligned(f->plan->workspace_bytes());
      return std::make_unique<PreparedFunction>(
          [=](const OpBuffers& b, DeviceContext& c) {
            char* ws = static_cast<char*>(b.workspace);
            const void* bias = bias_of(*f, masked ? b.in[3] : nullptr, ws + plan_bytes, c.stream());
            void* stats = lse ? b.out[1] : ws + plan_bytes + f->bias_bytes;
            std::vector<std::pair<AttentionTensor, void*>> tensors = {
                {AttentionTensor::kQ, const_cast<void*>(b.in[0])}, {AttentionTensor::kK, const_cast<void*>(b.in[1])},
                {AttentionTensor::kV, const_cast<void*>(b.in[2])}, {AttentionTensor::kO, b.out[0]},
                {AttentionTensor::kStats, stats}};
            if (bias) tensors.emplace_back(AttentionTensor::kBias, const_cast<void*>(bias));
            f->plan->execute(c.cudnn(), c.stream(), tensors, ws);
          },
          plan_bytes + f->bias_bytes + f->lse_bytes);
    }
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
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const AttentionShape shape =
        attention_shape(*s.in[1], *s.in[2], *s.in[3], s.has_in(6) ? s.in[6] : nullptr, scale_, causal_);
    if (s.has_out(3)) throw InputError("the gradient of a float attn_mask is computed on the cpu backend only");
    if (s.in[0]->dtype != s.in[1]->dtype || s.in[4]->dtype != s.in[1]->dtype) throw InputError("dY and Y must be of Q's type");
    if (s.in[5]->dtype != DType::kFloat) throw InputError("LSE is float32 on cuda");
    const DType t = s.in[1]->dtype;
    const bool masked = s.has_in(6), dq = s.has_out(0), dk = s.has_out(1), dv = s.has_out(2);
    std::string why = "cuDNN's graph computes dQ, dK and dV together; this step needs only some of them";
    std::optional<FusedAttention> fused;
    if (dq && dk && dv) fused = fused_attention(shape, t, masked ? s.in[6] : nullptr, true, ctx, &why);
    record(ctx, "backward", fused, why);
    if (fused) {
      auto f = std::make_shared<FusedAttention>(std::move(*fused));
      const size_t plan_bytes = workspace_aligned(f->plan->workspace_bytes());
      return std::make_unique<PreparedFunction>(
          [=](const OpBuffers& b, DeviceContext& c) {
            char* ws = static_cast<char*>(b.workspace);
            const void* bias = bias_of(*f, masked ? b.in[6] : nullptr, ws + plan_bytes, c.stream());
            std::vector<std::pair<AttentionTensor, void*>> tensors = {
                {AttentionTensor::kdO, const_cast<void*>(b.in[0])}, {AttentionTensor::kQ, const_cast<void*>(b.in[1])},
                {AttentionTensor::kK, const_cast<void*>(b.in[2])}, {AttentionTensor::kV, const_cast<void*>(b.in[3])},
                {AttentionTensor::kO, const_cast<void*>(b.in[4])}, {AttentionTensor::kStats, const_cast<void*>(b.in[5])},
                {AttentionTensor::kdQ, b.out[0]}, {AttentionTensor::kdK, b.out[1]}, {AttentionTensor::kdV, b.out[2]}};
            if (bias) tensors.emplace_back(AttentionTensor::kBias, const_cast<void*>(bias));
            f->plan->execute(c.cudnn(), c.stream(), tensors, ws);
          },
          plan_bytes + f->bias_bytes);
    }
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
