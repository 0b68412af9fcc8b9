// Gradients of ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd and the norm-like
// reductions: dY is broadcast back over the reduced axes (ReduceMean divides by the count,
// ReduceMax/ReduceMin route to the extrema and split ties evenly, like PyTorch's amax/amin
// backward; ReduceProd multiplies by the product of the other elements; ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum and ReduceLogSumExp by the derivative of their term, PyTorch's
// norm / logsumexp backward formulas).
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// The reduced axes, normalized; every axis when none are given. Axes come from the attribute
// (ReduceMean/ReduceMax/ReduceMin up to opset 17) or the constant second input (ReduceSum since 13).
std::vector<int64_t> reduced_axes(GradContext& c) {
  const int64_t r = rank_of(c.x(0));
  if (r < 0) c.fail("the input's rank must be known");
  std::vector<int64_t> axes = c.node.attr_ints("axes");
  if (axes.empty() && c.x(1)) {
    auto given = constant_ints(c.x(1));
    if (!given) c.fail("the axes input must be a constant");
    axes = *given;
  }
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  for (int64_t& a : axes) a = normalize_axis(a, r);
  return axes;
}

bool reduces_nothing(GradContext& c) {
  return c.node.attr_int("noop_with_empty_axes", 0) && c.node.attr_ints("axes").empty() &&
         (!c.x(1) || (constant_ints(c.x(1)) && constant_ints(c.x(1))->empty()));
}

// v (shaped like the output) with the reduced axes back as size-1 axes.
Value* keep_dims(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  return c.node.attr_int("keepdims", 1) ? v : c.b.unsqueeze(v, axes);
}

// Number of elements each output element summarises, as a scalar of type t.
Value* reduced_count(GradContext& c, const std::vector<int64_t>& axes, DType t) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  int64_t count = 1;
  std::vector<int64_t> dynamic;
  for (int64_t a : axes) {
    const Dim& d = x->type().shape->dims[static_cast<size_t>(a)];
    if (d.is_static())
      count *= *d.value;
    else
      dynamic.push_back(a);
  }
  Value* n = b.scalar(static_cast<double>(count), t);
  if (dynamic.empty()) return n;
  Value* dims = b.cast(b.same("Gather", {b.shape_of(x), b.int64s(dynamic)}), t);
  Value* product = nullptr;  // the dims multiplied one by one: ReduceProd is not among the kernels
  for (size_t i = 0; i < dynamic.size(); ++i) {
    Value* d = b.same("Gather", {dims, b.scalar(static_cast<double>(i), DType::kInt64)});
    product = product ? b.mul(product, d) : d;
  }
  return b.mul(n, product);
}

Grads reduce_sum(GradContext& c) {
  Grads g(c.node.inputs().size());
  if (reduces_nothing(c)) {
    g[0] = c.dy[0];
    return g;
  }
  auto axes = reduced_axes(c);
  g[0] = c.b.expand(keep_dims(c, c.dy[0], axes), c.b.shape_of(c.x(0)));
  return g;
}

Grads reduce_mean(GradContext& c) {
  Grads g(c.node.inputs().size());
  if (reduces_nothing(c)) {
    g[0] = c.dy[0];
    return g;
  }
  auto axes = reduced_axes(c);
  Value* x = c.x(0);
  Value* share = c.b.div(keep_dims(c, c.dy[0], axes), reduced_count(c, axes, x->dtype()));
  g[0] = c.b.expand(share, c.b.shape_of(x));
  return g;
}

// ReduceMax and ReduceMin: the elements equal to the output share its gradient.
Grads reduce_extremum(GradContext& c) {
  Grads g(c.node.inputs().size());
  if (reduces_nothing(c)) {
    g[0] = c.dy[0];
    return g;
  }
  GraphBuilder& b = c.b;
  auto axes = reduced_axes(c);
  Value* x = c.x(0);
  Value* hit = b.equal(x, keep_dims(c, c.y(0), axes));
  Value* ties = b.reduce_sum(b.cast(hit, x->dtype()), axes, true);
  Value* share = b.div(keep_dims(c, c.dy[0], axes), ties);
  g[0] = b.where(hit, b.expand(share, b.shape_of(x)), b.scalar(0, x->dtype()));
  return g;
}

// ReduceProd: d(prod)/dx_i is the product of the other elements, computed without dividing by a
// zero as PyTorch's prod_backward does: with no zero in the group it is prod / x_i; with one zero it
// is the product of the non-zero elements for that zero and 0 for the rest; with more, 0 for all.
Grads reduce_prod(GradContext& c) {
  Grads g(c.node.inputs().size());
  if (reduces_nothing(c)) {
    g[0] = c.dy[0];
    return g;
  }
  GraphBuilder& b = c.b;
  auto axes = reduced_axes(c);
  Value* x = c.x(0);
  const DType t = x->dtype();
  Value* zero = b.scalar(0, t);
  Value* one = b.scalar(1, t);
  Value* is_zero = b.equal(x, zero);
  Value* nonzero = b.where(is_zero, one, x);
  Value* product = b.same("ReduceProd", {nonzero}, attrs(Attribute::of_ints("axes", axes)));  // keepdims 1
  Value* zeros = b.reduce_sum(b.cast(is_zero, t), axes, true);
  Value* shape = b.shape_of(x);
  Value* for_zero = b.where(b.equal(zeros, one), product, zero);                   // [kept dims]
  Value* for_other = b.where(b.equal(zeros, zero), b.div(product, nonzero), zero);  // broadcast to x
  Value* others = b.where(is_zero, b.expand(for_zero, shape), for_other);
  g[0] = b.mul(b.expand(keep_dims(c, c.dy[0], axes), shape), others);
  return g;
}

// dY broadcast to X's shape, times the local derivative `local(dy_kept, y_kept)` (both shaped like
// X with the reduced axes kept as 1).
template <class Local>
Grads reduce_with(GradContext& c, Local local) {
  Grads g(c.node.inputs().size());
  auto axes = reduces_nothing(c) ? std::vector<int64_t>{} : reduced_axes(c);
  Value* dy = axes.empty() ? c.dy[0] : keep_dims(c, c.dy[0], axes);
  Value* y = axes.empty() ? c.y(0) : keep_dims(c, c.y(0), axes);
  g[0] = c.b.expand(local(dy, y), c.b.shape_of(c.x(0)));
  return g;
}

// ReduceL1: dY · sign(x) (torch: the subgradient 0 at 0).
Grads reduce_l1(GradContext& c) {
  return reduce_with(c, [&](Value* dy, Value*) { return c.b.mul(dy, c.b.same("Sign", {c.x(0)})); });
}

// ReduceL2: dY · x / y, 0 where y is 0 (torch's norm backward masks the division).
Grads reduce_l2(GradContext& c) {
  return reduce_with(c, [&](Value* dy, Value* y) {
    GraphBuilder& b = c.b;
    const DType t = c.x(0)->dtype();
    Value* zero = b.scalar(0, t);
    Value* is_zero = b.equal(y, zero);
    Value* share = b.where(is_zero, zero, b.div(dy, b.where(is_zero, b.scalar(1, t), y)));
    return b.mul(c.x(0), share);
  });
}

// ReduceSumSquare: dY · 2x.
Grads reduce_sum_square(GradContext& c) {
  return reduce_with(c, [&](Value* dy, Value*) {
    return c.b.mul(c.b.mul(dy, c.b.scalar(2, c.x(0)->dtype())), c.x(0));
  });
}

// ReduceLogSum: y = log Σx, so dY / Σx = dY · exp(-y).
Grads reduce_log_sum(GradContext& c) {
  return reduce_with(c, [&](Value* dy, Value* y) { return c.b.mul(dy, c.b.exp(c.b.neg(y))); });
}

// ReduceLogSumExp: dY · exp(x - y), the softmax over the reduced axes (torch's logsumexp backward).
Grads reduce_log_sum_exp(GradContext& c) {
  return reduce_with(c, [&](Value* dy, Value* y) { return c.b.mul(dy, c.b.exp(c.b.sub(c.x(0), y))); });
}

}  // namespace

void add_reduce_gradients(GradRuleTable& t) {
  t["ReduceSum"] = reduce_sum;
  t["ReduceMean"] = reduce_mean;
  t["ReduceMax"] = reduce_extremum;
  t["ReduceMin"] = reduce_extremum;
  t["ReduceProd"] = reduce_prod;
  t["ReduceL1"] = reduce_l1;
  t["ReduceL2"] = reduce_l2;
  t["ReduceSumSquare"] = reduce_sum_square;
  t["ReduceLogSum"] = reduce_log_sum;
  t["ReduceLogSumExp"] = reduce_log_sum_exp;
}

}  // namespace amp
