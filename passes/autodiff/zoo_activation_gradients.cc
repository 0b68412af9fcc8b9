// Gradients of the elementwise ops the torchvision classification models and their single-op
// probes need beyond the first set (issue 16): Softplus, Elu, Selu and Mod (both fmod modes).
// Sign has none (non_differentiable_ops: its derivative is 0 wherever it exists). Formulas follow
// PyTorch's derivatives.yaml and its CPU backward kernels.
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

Value* constant_like(GradContext& c, double v, const Value* like) { return c.b.scalar(v, like->dtype()); }

// softplus' = e^x / (e^x + 1), and 1 above PyTorch's threshold 20 (softplus_backward).
Grads softplus(GradContext& c) {
  Value* x = c.x(0);
  Value* z = c.b.exp(x);
  Value* inside = c.b.div(c.b.mul(c.dy[0], z), c.b.add(z, constant_like(c, 1, x)));
  return {c.b.where(c.b.greater(x, constant_like(c, 20, x)), c.dy[0], inside)};
}

// PyTorch's elu_backward from the input: x <= 0 gives dy * negcoef * e^x, else dy * poscoef (NaN
// fails x <= 0 and gets dy * poscoef, as there). Elu: negcoef alpha, poscoef 1; Selu: negcoef
// alpha * gamma, poscoef gamma.
Grads elu_like(GradContext& c, double negcoef, double poscoef) {
  Value* x = c.x(0);
  Value* at_or_below_zero = c.b.op("LessOrEqual", {x, constant_like(c, 0, x)}, DType::kBool);
  Value* negative = c.b.mul(c.b.mul(c.dy[0], constant_like(c, negcoef, x)), c.b.exp(x));
  Value* positive = poscoef == 1 ? c.dy[0] : c.b.mul(c.dy[0], constant_like(c, poscoef, x));
  return {c.b.where(at_or_below_zero, negative, positive)};
}

Grads elu(GradContext& c) { return elu_like(c, c.node.attr_float("alpha", 1.0f), 1); }

Grads selu(GradContext& c) {
  const double alpha = c.node.attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = c.node.attr_float("gamma", 1.05070102214813232421875f);
  return elu_like(c, alpha * gamma, gamma);
}

// y = a - q b, q = floor(a / b) (fmod 0, torch.remainder) or trunc(a / b) (fmod 1, torch.fmod):
// da = dy, db = -dy q, as derivatives.yaml says for both. q is read back as (a - y) / b, which is
// the quotient either mode rounded to, so one rule serves both.
Grads mod(GradContext& c) {
  Value* a = c.x(0);
  Value* b = c.x(1);
  Grads g(2, nullptr);
  if (c.wants(0)) g[0] = c.sum_to_input(c.dy[0], 0);
  if (c.wants(1)) {
    Value* q = c.b.div(c.b.sub(a, c.y(0)), b);
    g[1] = c.sum_to_input(c.b.neg(c.b.mul(c.dy[0], q)), 1);
  }
  return g;
}

}  // namespace

void add_zoo_activation_gradients(GradRuleTable& t) {
  t["Softplus"] = softplus;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Mod"] = mod;
}

}  // namespace amp
