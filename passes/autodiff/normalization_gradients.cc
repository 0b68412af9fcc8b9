// Gradients of BatchNormalization, LayerNormalization, InstanceNormalization,
// MeanVarianceNormalization and LRN. In training mode the statistics depend on X, which makes dX a
// three-term formula over the normalized axes: one ai.onnx_amp op each for BatchNormalization and
// LayerNormalization, which recomputes the statistics from X instead of keeping them alive from the
// forward pass; standard ops (ReduceMean over the normalized axes) for InstanceNormalization and
// MeanVarianceNormalization. Inference-mode BatchNormalization is an affine map per channel and
// takes standard ops.
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

// Mean over `axes`, kept as size-1 dims.
Value* mean_over(GraphBuilder& b, Value* v, const std::vector<int64_t>& axes) {
  return b.same("ReduceMean", {v}, attrs(Attribute::of_ints("axes", axes)));
}

// InstanceNormalization: per (n, c) plane xhat = (x - mean) inv, inv = (var + eps)^-1/2, y = scale xhat + B.
// With g = dY scale: dX = inv (g - mean(g) - xhat mean(g xhat)); dScale = Σ dY xhat and dB = Σ dY over N and
// the spatial dims (as torch's instance_norm backward).
Grads instance_norm(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 3) c.fail("the input's rank must be known and at least 3");
  const DType t = x->dtype();
  std::vector<int64_t> spatial, not_channel{0};
  for (int64_t i = 2; i < r; ++i) {
    spatial.push_back(i);
    not_channel.push_back(i);
  }
  Value* centered = b.sub(x, mean_over(b, x, spatial));
  Value* var = mean_over(b, b.mul(centered, centered), spatial);
  Value* eps = b.scalar(c.node.attr_float("epsilon", 1e-5f), t);
  Value* inv = b.div(b.scalar(1, t), b.sqrt(b.add(var, eps)));
  Value* xhat = b.mul(centered, inv);
  auto channel_sum = [&](Value* v, size_t like) { return b.cast(b.reduce_sum(v, not_channel, false), c.x(like)->dtype()); };
  Grads g(3);
  if (c.wants(0)) {
    Value* gy = b.mul(c.dy[0], per_channel(b, c.x(1), r, t));
    Value* inner = b.sub(b.sub(gy, mean_over(b, gy, spatial)), b.mul(xhat, mean_over(b, b.mul(gy, xhat), spatial)));
    g[0] = b.mul(inv, inner);
  }
  if (c.wants(1)) g[1] = channel_sum(b.mul(c.dy[0], xhat), 1);
  if (c.wants(2)) g[2] = channel_sum(c.dy[0], 2);
  return g;
}

// MeanVarianceNormalization: y = c / s with c = x - mean, sigma = sqrt(mean(c^2)), s = sigma + 1e-9 (ONNX's
// function body). dX = (dY - mean(dY)) / s - c mean(dY c) / (s^2 sigma), the means over `axes`.
Grads mean_variance_norm(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 0) c.fail("the input's rank must be known");
  std::vector<int64_t> axes = c.node.attr_ints("axes", {0, 2, 3});
  for (int64_t& a : axes) a = normalize_axis(a, r);
  const DType t = x->dtype();
  Value* dy = c.dy[0];
  Value* centered = b.sub(x, mean_over(b, x, axes));
  Value* sigma = b.sqrt(mean_over(b, b.mul(centered, centered), axes));
  Value* s = b.add(sigma, b.scalar(1e-9, t));
  Value* direct = b.div(b.sub(dy, mean_over(b, dy, axes)), s);
  Value* through = b.div(b.mul(centered, mean_over(b, b.mul(dy, centered), axes)), b.mul(b.mul(s, s), sigma));
  return {b.sub(direct, through)};
}

// LRN: y = x base^-beta, base = bias + alpha / size * (sum of x^2 over the channel window
// [c - before, c + after]). dx = dy base^-beta - 2 alpha beta / size * x * (the same sums of
// dy x base^(-beta-1), over the mirrored window [c - after, c + before]). A window sum over channels
// is a convolution of [N, 1, C, rest] with a [1, 1, size, 1] kernel of ones.
Grads lrn(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 3) c.fail("the input's rank must be known and at least 3");
  const Dim& channels = x->type().shape->dims[1];
  if (!channels.is_static()) c.fail("the channel count must be known");
  const int64_t size = c.node.attr_int("size", 0);
  const double alpha = c.node.attr_float("alpha", 1e-4f), beta = c.node.attr_float("beta", 0.75f),
               bias = c.node.attr_float("bias", 1.0f);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const DType t = x->dtype();
  Value* shape = b.shape_of(x);
  Value* planes = b.int64s({0, 1, *channels.value, -1});
  Tensor ones(t == DType::kDouble ? DType::kDouble : DType::kFloat, {1, 1, size, 1});
  for (int64_t i = 0; i < size; ++i) {
    if (ones.dtype == DType::kDouble) ones.mutable_as<double>()[i] = 1;
    else ones.mutable_as<float>()[i] = 1;
  }
  Value* kernel = b.cast(b.constant(std::move(ones)), t);
  auto window_sum = [&](Value* v, int64_t lo, int64_t hi) {
    Value* summed = b.same("Conv", {b.reshape(v, planes), kernel}, attrs(Attribute::of_ints("pads", {lo, 0, hi, 0})));
    return b.reshape(summed, shape);
  };
  Value* base = b.add(b.scalar(bias, t), b.mul(b.scalar(alpha / static_cast<double>(size), t), window_sum(b.mul(x, x), before, after)));
  Grads g(1);
  Value* direct = b.mul(c.dy[0], b.same("Pow", {base, b.scalar(-beta, t)}));
  Value* through = b.mul(b.mul(c.dy[0], x), b.same("Pow", {base, b.scalar(-beta - 1, t)}));
  Value* spread = b.mul(b.mul(b.scalar(2 * alpha * beta / static_cast<double>(size), t), x), window_sum(through, after, before));
  g[0] = b.sub(direct, spread);
  return g;
}

}  // namespace

void add_normalization_gradients(GradRuleTable& t) {
  t["BatchNormalization"] = batch_norm;
  t["LayerNormalization"] = layer_norm;
  t["InstanceNormalization"] = instance_norm;
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["LRN"] = lrn;
}

}  // namespace amp
