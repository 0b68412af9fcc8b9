// Gradients of the data-movement ops: reshapes undo themselves, Transpose inverts its permutation,
// Concat and Split swap roles, Expand sums back. Slice and Gather place dY into zeros of the data's
// shape (Gather's repeated indices accumulate), which needs ai.onnx_amp ops.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// X's shape as a constant when static, else read at run time.
Value* shape_of_input(GradContext& c, size_t i) {
  Value* x = c.x(i);
  const auto& s = x->type().shape;
  if (s && s->is_static()) {
    std::vector<int64_t> dims;
    for (const Dim& d : s->dims) dims.push_back(*d.value);
    return c.b.int64s(dims);
  }
  return c.b.shape_of(x);
}

Grads reshape_back(GradContext& c) {
  Grads g(c.node.inputs().size());
  g[0] = c.b.reshape(c.dy[0], shape_of_input(c, 0));
  return g;
}

Grads transpose(GradContext& c) {
  std::vector<int64_t> perm = c.node.attr_ints("perm");
  if (perm.empty()) {
    const int64_t r = rank_of(c.x(0));
    if (r < 0) c.fail("Transpose without perm needs the input's rank");
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {c.b.transpose(c.dy[0], inverse)};
}

Grads concat(GradContext& c) {
  GraphBuilder& b = c.b;
  const size_t n = c.node.inputs().size();
  const int64_t r = rank_of(c.y(0));
  if (r < 0) c.fail("the output's rank must be known");
  const int64_t axis = normalize_axis(c.node.attr_int("axis", 0), r);
  std::vector<int64_t> sizes;
  std::vector<ValueType> types;
  for (size_t i = 0; i < n; ++i) {
    Value* x = c.x(i);
    types.push_back(x->type());
    const Dim* d = rank_of(x) == r ? &x->type().shape->dims[static_cast<size_t>(axis)] : nullptr;
    if (d && d->is_static()) sizes.push_back(*d->value);
  }
  Value* split = nullptr;
  if (sizes.size() == n) {
    split = b.int64s(sizes);
  } else {  // sizes read at run time from each input's shape
    std::vector<Value*> parts;
    for (size_t i = 0; i < n; ++i) parts.push_back(b.same("Gather", {b.shape_of(c.x(i)), b.int64s({axis})}));
    split = b.same("Concat", parts, attrs(Attribute::of_int("axis", 0)));
  }
  return b.emit("Split", {c.dy[0], split}, types, attrs(Attribute::of_int("axis", axis)));
}

Grads split(GradContext& c) {
  GraphBuilder& b = c.b;
  std::vector<Value*> parts;
  for (size_t i = 0; i < c.node.outputs().size(); ++i)
    parts.push_back(c.dy[i] ? c.dy[i] : b.zeros_like(c.y(i)));
  Grads g(c.node.inputs().size());
  g[0] = b.same("Concat", parts, attrs(Attribute::of_int("axis", c.node.attr_int("axis", 0))));
  return g;
}

Grads slice(GradContext& c) {
  std::vector<Value*> in{c.dy[0], shape_of_input(c, 0), c.x(1), c.x(2), c.x(3), c.x(4)};
  while (!in.back()) in.pop_back();
  Grads g(c.node.inputs().size());
  g[0] = c.b.emit("SliceGrad", in, {c.x(0)->type()}, {}, kAmpDomain)[0];
  return g;
}

Grads gather(GradContext& c) {
  Grads g(2);
  g[0] = c.b.emit("GatherGrad", {c.dy[0], shape_of_input(c, 0), c.x(1)}, {c.x(0)->type()},
                  attrs(Attribute::of_int("axis", c.node.attr_int("axis", 0))), kAmpDomain)[0];
  return g;
}

Grads expand(GradContext& c) { return {c.sum_to_input(c.dy[0], 0)}; }

}  // namespace

void add_shape_gradients(GradRuleTable& t) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) t[op] = reshape_back;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Slice"] = slice;
  t["Gather"] = gather;
  t["Expand"] = expand;
}

}  // namespace amp
