// Gradients of the broadcasting elementwise ops. Each input's gradient is summed over the axes it
// was broadcast along (GradContext::sum_to_input), as PyTorch's sum_to does.
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

Grads add(GradContext& c) {
  Grads g(2);
  if (c.wants(0)) g[0] = c.sum_to_input(c.dy[0], 0);
  if (c.wants(1)) g[1] = c.sum_to_input(c.dy[0], 1);
  return g;
}

Grads sub(GradContext& c) {
  Grads g(2);
  if (c.wants(0)) g[0] = c.sum_to_input(c.dy[0], 0);
  if (c.wants(1)) g[1] = c.sum_to_input(c.b.neg(c.dy[0]), 1);
  return g;
}

Grads mul(GradContext& c) {
  Grads g(2);
  if (c.wants(0)) g[0] = c.sum_to_input(c.b.mul(c.dy[0], c.x(1)), 0);
  if (c.wants(1)) g[1] = c.sum_to_input(c.b.mul(c.dy[0], c.x(0)), 1);
  return g;
}

// d(a/b)/db = -a / b^2, written as PyTorch's div_tensor_other_backward.
Grads div(GradContext& c) {
  Grads g(2);
  Value* a = c.x(0);
  Value* b = c.x(1);
  if (c.wants(0)) g[0] = c.sum_to_input(c.b.div(c.dy[0], b), 0);
  if (c.wants(1)) g[1] = c.sum_to_input(c.b.div(c.b.mul(c.b.neg(c.dy[0]), a), c.b.mul(b, b)), 1);
  return g;
}

// d(x^e)/dx = e x^(e-1); d(x^e)/de = x^e log(x), 0 where x == 0 (PyTorch's pow_backward_exponent).
Grads pow(GradContext& c) {
  Grads g(2);
  Value* x = c.x(0);
  Value* e = c.x(1);
  if (c.wants(0)) {
    Value* ex = c.b.cast(e, x->dtype());
    Value* d = c.b.mul(ex, c.b.same("Pow", {x, c.b.sub(ex, c.b.scalar(1, x->dtype()))}));
    g[0] = c.sum_to_input(c.b.mul(c.dy[0], d), 0);
  }
  if (c.wants(1)) {
    Value* zero = c.b.scalar(0, x->dtype());
    Value* d = c.b.where(c.b.equal(x, zero), zero, c.b.mul(c.y(0), c.b.log(x)));
    g[1] = c.sum_to_input(c.b.cast(c.b.mul(c.dy[0], d), e->dtype()), 1);
  }
  return g;
}

// Min and Max (variadic): the gradient goes to the inputs equal to the result, split evenly
// between ties — for two inputs that is PyTorch's maximum/minimum backward (grad/2 on ties).
Grads select_extreme(GradContext& c) {
  const size_t n = c.node.inputs().size();
  if (n == 1) return {c.dy[0]};
  Value* y = c.y(0);
  std::vector<Value*> hits(n);
  Value* count = nullptr;
  for (size_t i = 0; i < n; ++i) {
    hits[i] = c.b.cast(c.b.equal(c.x(i), y), y->dtype());
    count = count ? c.b.add(count, hits[i]) : hits[i];
  }
  Value* share = c.b.div(c.dy[0], count);
  Grads g(n);
  for (size_t i = 0; i < n; ++i)
    if (c.wants(i)) g[i] = c.sum_to_input(c.b.mul(share, hits[i]), i);
  return g;
}

// Sum (variadic): each operand gets dy, summed over the axes it was broadcast along.
Grads sum(GradContext& c) {
  Grads g(c.node.inputs().size());
  for (size_t i = 0; i < g.size(); ++i)
    if (c.wants(i)) g[i] = c.sum_to_input(c.dy[0], i);
  return g;
}

// Mean (variadic): each operand gets dy / n, summed over the axes it was broadcast along
// (torch.mean over a stack: dy / n to each).
Grads mean(GradContext& c) {
  Grads g(c.node.inputs().size());
  Value* share = c.b.div(c.dy[0], c.b.scalar(static_cast<double>(g.size()), c.dy[0]->dtype()));
  for (size_t i = 0; i < g.size(); ++i)
    if (c.wants(i)) g[i] = c.sum_to_input(share, i);
  return g;
}

// PRelu(x, slope) = x < 0 ? slope x : x: dx = dy slope where x < 0, else dy; dslope = dy x where
// x < 0, else 0 (PyTorch's prelu backward; at x == 0 both take the x >= 0 side).
Grads prelu(GradContext& c) {
  Grads g(2);
  Value* x = c.x(0);
  Value* negative = c.b.less(x, c.b.scalar(0, x->dtype()));
  if (c.wants(0)) g[0] = c.sum_to_input(c.b.where(negative, c.b.mul(c.dy[0], c.x(1)), c.dy[0]), 0);
  if (c.wants(1))
    g[1] = c.sum_to_input(c.b.where(negative, c.b.mul(c.dy[0], x), c.b.scalar(0, x->dtype())), 1);
  return g;
}

Grads where(GradContext& c) {
  Grads g(3);
  Value* zero = c.b.scalar(0, c.dy[0]->dtype());
  if (c.wants(1)) g[1] = c.sum_to_input(c.b.where(c.x(0), c.dy[0], zero), 1);
  if (c.wants(2)) g[2] = c.sum_to_input(c.b.where(c.x(0), zero, c.dy[0]), 2);
  return g;
}

}  // namespace

void add_broadcast_gradients(GradRuleTable& t) {
  t["Add"] = add;
  t["Sub"] = sub;
  t["Mul"] = mul;
  t["Div"] = div;
  t["Pow"] = pow;
  t["Min"] = select_extreme;
  t["Max"] = select_extreme;
  t["Where"] = where;
  t["Sum"] = sum;
  t["Mean"] = mean;
  t["PRelu"] = prelu;
}

}  // namespace amp
