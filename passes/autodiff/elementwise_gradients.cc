// Gradients of one-input elementwise ops and of the ops that pass values through (Identity, Cast,
// Dropout). Formulas follow PyTorch's derivatives.yaml, so parity tests compare like with like.
#include <cmath>
#include <utility>

#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

Value* constant_like(GradContext& c, double v, const Value* like) { return c.b.scalar(v, like->dtype()); }

// relu'(x) = x > 0, read from the result as PyTorch's threshold_backward(grad, result, 0) does
// (y > 0 exactly where x > 0; NaN fails both). The backward then keeps y alive rather than x, so a
// product whose only other reader was the Relu can apply it in its epilogue and x is never stored.
Grads relu(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.where(c.b.greater(y, constant_like(c, 0, y)), c.dy[0], constant_like(c, 0, y))};
}

Grads leaky_relu(GradContext& c) {
  Value* x = c.x(0);
  Value* slope = constant_like(c, c.node.attr_float("alpha", 0.01f), x);
  return {c.b.where(c.b.greater(x, constant_like(c, 0, x)), c.dy[0], c.b.mul(c.dy[0], slope))};
}

// sigmoid' = y (1 - y), computed from the output as PyTorch does.
Grads sigmoid(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.mul(c.b.mul(c.dy[0], c.b.sub(constant_like(c, 1, y), y)), y)};
}

Grads tanh(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.mul(c.dy[0], c.b.sub(constant_like(c, 1, y), c.b.mul(y, y)))};
}

// erf'(x) = 2/sqrt(pi) exp(-x^2).
Grads erf(GradContext& c) {
  Value* x = c.x(0);
  Value* e = c.b.exp(c.b.neg(c.b.mul(x, x)));
  return {c.b.mul(c.b.mul(c.dy[0], constant_like(c, 2.0 / std::sqrt(M_PI), x)), e)};
}

// ai.onnx_amp Gelu: one GeluGrad reading X, as PyTorch's GeluBackward does.
Grads gelu(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.emit("GeluGrad", {c.dy[0], x}, {x->type()},
                   attrs(Attribute::of_string("approximate", c.node.attr_string("approximate", "none"))), kAmpDomain)[0]};
}

// HardSigmoid' = alpha where 0 < alpha x + beta < 1, else 0: PyTorch's hardsigmoid_backward, which
// tests -3 < x < 3 for its alpha 1/6, beta 1/2. The bounds on x are worked out in double, so alpha
// 1/6 (a float attribute) gives exactly -3 and 3.
Grads hard_sigmoid(GradContext& c) {
  Value* x = c.x(0);
  const double alpha = c.node.attr_float("alpha", 0.2f), beta = c.node.attr_float("beta", 0.5f);
  Value* zero = constant_like(c, 0, x);
  if (alpha == 0) return {c.b.mul(c.dy[0], zero)};
  double lo = -beta / alpha, hi = (1 - beta) / alpha;
  if (alpha < 0) std::swap(lo, hi);
  Value* inside = c.b.logical_and(c.b.greater(x, constant_like(c, lo, x)), c.b.less(x, constant_like(c, hi, x)));
  return {c.b.where(inside, c.b.mul(c.dy[0], constant_like(c, alpha, x)), zero)};
}

// HardSwish' = 0 below -3, x/3 + 1/2 from -3 to 3, 1 from 3 on, operation for operation as
// PyTorch's vectorized hardswish_backward computes it (its scalar loop, which handles the few
// elements left over, puts x = 3 in the middle piece instead); NaN gives NaN.
Grads hard_swish(GradContext& c) {
  Value* x = c.x(0);
  Value* three = constant_like(c, 3, x);
  Value* slope = c.b.mul(c.dy[0], c.b.add(c.b.div(x, three), constant_like(c, 0.5, x)));
  Value* from_minus_three = c.b.where(c.b.op("GreaterOrEqual", {x, three}, DType::kBool), c.dy[0], slope);
  return {c.b.where(c.b.less(x, constant_like(c, -3, x)), constant_like(c, 0, x), from_minus_three)};
}

// Softsign' = 1 / (1 + |x|)^2 (torch's softsign is x / (1 + |x|), differentiated by autograd).
Grads softsign(GradContext& c) {
  Value* x = c.x(0);
  Value* d = c.b.add(constant_like(c, 1, x), c.b.same("Abs", {x}));
  return {c.b.div(c.dy[0], c.b.mul(d, d))};
}

// Celu' = e^(x / alpha) for x <= 0, else 1: PyTorch's elu_backward with input scale 1 / alpha,
// dy * (1 / alpha) * alpha * e^(x / alpha) (NaN fails x <= 0 and gets dy, as there).
Grads celu(GradContext& c) {
  Value* x = c.x(0);
  const double alpha = c.node.attr_float("alpha", 1.0f), input_scale = 1 / alpha;
  Value* at_or_below_zero = c.b.op("LessOrEqual", {x, constant_like(c, 0, x)}, DType::kBool);
  Value* negative = c.b.mul(c.b.mul(c.dy[0], constant_like(c, input_scale * alpha, x)),
                            c.b.exp(c.b.mul(x, constant_like(c, input_scale, x))));
  return {c.b.where(at_or_below_zero, negative, c.dy[0])};
}

// ThresholdedRelu' = 1 above alpha, else 0 (torch's threshold_backward).
Grads thresholded_relu(GradContext& c) {
  Value* x = c.x(0);
  Value* above = c.b.greater(x, constant_like(c, c.node.attr_float("alpha", 1.0f), x));
  return {c.b.where(above, c.dy[0], constant_like(c, 0, x))};
}

// Shrink' = 1 below -lambd and above lambd, else 0, whatever the bias (torch's hardshrink_backward
// and softshrink_backward).
Grads shrink(GradContext& c) {
  Value* x = c.x(0);
  const double lambd = c.node.attr_float("lambd", 0.5f);
  Value* zero = constant_like(c, 0, x);
  Value* above = c.b.where(c.b.greater(x, constant_like(c, lambd, x)), c.dy[0], zero);
  return {c.b.where(c.b.less(x, constant_like(c, -lambd, x)), c.dy[0], above)};
}

// The trigonometric and hyperbolic functions, as derivatives.yaml writes them (rsqrt(v) as
// 1 / sqrt(v): ONNX has no Rsqrt).
Value* square(GradContext& c, Value* v) { return c.b.mul(v, v); }
Grads sin(GradContext& c) { return {c.b.mul(c.dy[0], c.b.same("Cos", {c.x(0)}))}; }
Grads cos(GradContext& c) { return {c.b.mul(c.dy[0], c.b.neg(c.b.same("Sin", {c.x(0)})))}; }
Grads tan(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.mul(c.dy[0], c.b.add(constant_like(c, 1, y), square(c, y)))};
}
// asin' = 1 / sqrt(1 - x^2), acos' = -asin'.
Grads asin(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.div(c.dy[0], c.b.sqrt(c.b.sub(constant_like(c, 1, x), square(c, x))))};
}
Grads acos(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.neg(c.b.div(c.dy[0], c.b.sqrt(c.b.sub(constant_like(c, 1, x), square(c, x)))))};
}
Grads atan(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.div(c.dy[0], c.b.add(square(c, x), constant_like(c, 1, x)))};
}
Grads sinh(GradContext& c) { return {c.b.mul(c.dy[0], c.b.same("Cosh", {c.x(0)}))}; }
Grads cosh(GradContext& c) { return {c.b.mul(c.dy[0], c.b.same("Sinh", {c.x(0)}))}; }
Grads asinh(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.div(c.dy[0], c.b.sqrt(c.b.add(square(c, x), constant_like(c, 1, x))))};
}
Grads acosh(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.div(c.dy[0], c.b.sqrt(c.b.sub(square(c, x), constant_like(c, 1, x))))};
}
Grads atanh(GradContext& c) {
  Value* x = c.x(0);
  return {c.b.div(c.dy[0], c.b.sub(constant_like(c, 1, x), square(c, x)))};
}

Grads exp(GradContext& c) { return {c.b.mul(c.dy[0], c.y(0))}; }
Grads log(GradContext& c) { return {c.b.div(c.dy[0], c.x(0))}; }

// sqrt'(x) = 1 / (2 sqrt(x)) = 1 / (2 y).
Grads sqrt(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.div(c.dy[0], c.b.mul(y, constant_like(c, 2, y)))};
}

// (1/x)' = -1/x^2 = -y^2.
Grads reciprocal(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.mul(c.b.neg(c.dy[0]), c.b.mul(y, y))};
}

Grads neg(GradContext& c) { return {c.b.neg(c.dy[0])}; }

// |x|' = sign(x), 0 at 0.
Grads abs(GradContext& c) {
  Value* x = c.x(0);
  Value* zero = constant_like(c, 0, x);
  Value* negative = c.b.where(c.b.less(x, zero), c.b.neg(c.dy[0]), zero);
  return {c.b.where(c.b.greater(x, zero), c.dy[0], negative)};
}

Grads identity(GradContext& c) { return {c.dy[0]}; }

Grads cast(GradContext& c) { return {c.b.cast(c.dy[0], c.x(0)->dtype())}; }
// CastLike(x, target_type): as Cast for x; target_type gives only its element type, no gradient.
Grads cast_like(GradContext& c) { return {c.b.cast(c.dy[0], c.x(0)->dtype()), nullptr}; }

// Training-mode Dropout scales kept elements by 1/(1-ratio); its mask output says which were kept.
// Without a training_mode input Dropout is the identity.
Grads dropout(GradContext& c) {
  Value* training = c.x(2);
  if (!training) return {c.dy[0]};
  Value* mask = c.y(1);
  if (!mask) c.fail("training-mode Dropout needs its mask output (the autodiff pass adds it)");
  Value* x = c.x(0);
  Value* keep = constant_like(c, 1, x);
  if (Value* ratio = c.x(1)) keep = c.b.sub(keep, c.b.cast(ratio, x->dtype()));
  Value* kept = c.b.div(c.b.mul(c.dy[0], c.b.cast(mask, x->dtype())), keep);
  return {c.b.where(training, kept, c.dy[0])};
}

// Clip passes the gradient where min <= x <= max (PyTorch's clamp_backward); min and max get none.
Grads clip(GradContext& c) {
  Value* x = c.x(0);
  Value* inside = nullptr;
  if (Value* lo = c.x(1)) inside = c.b.logical_not(c.b.less(x, lo));
  if (Value* hi = c.x(2)) {
    Value* below = c.b.logical_not(c.b.greater(x, hi));
    inside = inside ? c.b.logical_and(inside, below) : below;
  }
  if (!inside) return {c.dy[0]};
  return {c.b.where(inside, c.dy[0], constant_like(c, 0, x))};
}

}  // namespace

void add_elementwise_gradients(GradRuleTable& t) {
  t["Relu"] = relu;
  t["LeakyRelu"] = leaky_relu;
  t["Sigmoid"] = sigmoid;
  t["Tanh"] = tanh;
  t["Erf"] = erf;
  t["HardSigmoid"] = hard_sigmoid;
  t["HardSwish"] = hard_swish;
  t[std::string(kAmpDomain) + ":Gelu"] = gelu;
  t["Softsign"] = softsign;
  t["Celu"] = celu;
  t["ThresholdedRelu"] = thresholded_relu;
  t["Shrink"] = shrink;
  t["Sin"] = sin;
  t["Cos"] = cos;
  t["Tan"] = tan;
  t["Asin"] = asin;
  t["Acos"] = acos;
  t["Atan"] = atan;
  t["Sinh"] = sinh;
  t["Cosh"] = cosh;
  t["Asinh"] = asinh;
  t["Acosh"] = acosh;
  t["Atanh"] = atanh;
  t["Exp"] = exp;
  t["Log"] = log;
  t["Sqrt"] = sqrt;
  t["Reciprocal"] = reciprocal;
  t["Neg"] = neg;
  t["Abs"] = abs;
  t["Identity"] = identity;
  t["Cast"] = cast;
  t["CastLike"] = cast_like;
  t["Dropout"] = dropout;
  t["Clip"] = clip;
}

}  // namespace amp
