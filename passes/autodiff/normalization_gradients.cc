// Gradients of BatchNormalization and LayerNormalization. In training mode the statistics depend on
// X, which makes dX a three-term formula over the normalized axes: one ai.onnx_amp op each, which
// recomputes the statistics from X instead of keeping them alive from the forward pass. Inference-
// mode BatchNormalization is an affine map per channel and takes standard ops.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// [C] -> [C, 1, ..., 1] so it broadcasts against [N, C, D1, ...].
Value* per_channel(GraphBuilder& b, Value* v, int64_t rank, DType t) {
  std::vector<int64_t> axes;
  for (int64_t i = 1; i < rank - 1; ++i) axes.push_back(i);
  Value* c = b.cast(v, t);
  return axes.empty() ? c : b.unsqueeze(c, axes);
}

// y = scale (x - mean) / sqrt(var + eps) + bias, per channel.
Grads batch_norm_inference(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 2) c.fail("the input's rank must be known");
  const DType t = x->dtype();
  Value* eps = b.scalar(c.node.attr_float("epsilon", 1e-5f), t);
  Value* inv_std = b.div(b.scalar(1, t), b.sqrt(b.add(per_channel(b, c.x(4), r, t), eps)));
  std::vector<int64_t> not_channel{0};
  for (int64_t i = 2; i < r; ++i) not_channel.push_back(i);
  auto channel_sum = [&](Value* v, size_t like) { return b.cast(b.reduce_sum(v, not_channel, false), c.x(like)->dtype()); };
  Value* dxhat = b.mul(c.dy[0], per_channel(b, c.x(1), r, t));
  Value* centered = b.sub(x, per_channel(b, c.x(3), r, t));
  Grads g(5);
  if (c.wants(0)) g[0] = b.mul(dxhat, inv_std);
  if (c.wants(1)) g[1] = channel_sum(b.mul(c.dy[0], b.mul(centered, inv_std)), 1);
  if (c.wants(2)) g[2] = channel_sum(c.dy[0], 2);
  if (c.wants(3)) g[3] = channel_sum(b.neg(b.mul(dxhat, inv_std)), 3);
  if (c.wants(4)) {  // d/dvar (var + eps)^-1/2 = -1/2 inv_std^3
    Value* cube = b.mul(b.mul(inv_std, inv_std), inv_std);
    g[4] = channel_sum(b.mul(b.mul(dxhat, centered), b.mul(cube, b.scalar(-0.5, t))), 4);
  }
  return g;
}

Grads batch_norm(GradContext& c) {
  if (c.node.attr_int("training_mode", 0) == 0) return batch_norm_inference(c);
  const ValueType none;
  auto outs = c.b.emit("BatchNormalizationGrad", {c.dy[0], c.x(0), c.x(1)},
                       {c.x(0)->type(), c.wants(1) ? c.x(1)->type() : none, c.wants(2) ? c.x(2)->type() : none},
                       attrs(Attribute::of_float("epsilon", c.node.attr_float("epsilon", 1e-5f))), kAmpDomain);
  return {c.wants(0) ? outs[0] : nullptr, outs[1], outs[2]};
}

Grads layer_norm(GradContext& c) {
  if ((c.dy.size() > 1 && c.dy[1]) || (c.dy.size() > 2 && c.dy[2]))
    c.fail("gradients through the Mean and InvStdDev outputs are not supported");
  const ValueType none;
  auto outs = c.b.emit("LayerNormalizationGrad", {c.dy[0], c.x(0), c.x(1)},
                       {c.x(0)->type(), c.wants(1) ? c.x(1)->type() : none, c.wants(2) ? c.x(2)->type() : none},
                       attrs(Attribute::of_int("axis", c.node.attr_int("axis", -1)),
                        Attribute::of_float("epsilon", c.node.attr_float("epsilon", 1e-5f))),
                       kAmpDomain);
  return {c.wants(0) ? outs[0] : nullptr, outs[1], outs[2]};
}

}  // namespace

void add_normalization_gradients(GradRuleTable& t) {
  t["BatchNormalization"] = batch_norm;
  t["LayerNormalization"] = layer_norm;
}

}  // namespace amp
