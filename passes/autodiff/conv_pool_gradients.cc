// Gradients of Conv and the pooling ops. Standard ONNX has no op for a convolution's weight
// gradient or for routing a gradient to a pooling window's arg-max, so these emit ai.onnx_amp ops
// that carry the forward node's attributes; GlobalAveragePool's is a plain broadcast and divide,
// GlobalMaxPool's routes to the plane's maxima like ReduceMax's. The ai.onnx_amp ops of later
// opsets: DeformConv's gradients come from one DeformConvGrad, Col2Im's input's from Im2Col (unfold).
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

std::vector<Attribute> copy_attributes(const Node& n) {
  std::vector<Attribute> out;
  for (const Attribute& a : n.attributes()) out.push_back(a.copy_without_graphs());
  return out;
}

Grads conv(GradContext& c) {
  const ValueType none;
  auto outs = c.b.emit("ConvGrad", {c.dy[0], c.x(0), c.x(1)},
                       {c.wants(0) ? c.x(0)->type() : none, c.wants(1) ? c.x(1)->type() : none,
                        c.wants(2) ? c.x(2)->type() : none},
                       copy_attributes(c.node), kAmpDomain);
  return {outs[0], outs[1], outs[2]};
}

Grads pool(GradContext& c) {
  const std::string op = c.node.op_type() + "Grad";
  return {c.b.emit(op, {c.dy[0], c.x(0)}, {c.x(0)->type()}, copy_attributes(c.node), kAmpDomain)[0]};
}

// Every element of an H x W window receives dY / (H W). The count is a constant where the spatial
// dims are static and is read from Shape(X) at run time where they are not (Swin's pooled
// activations come out of computed Reshapes and Transposes with only their rank known).
Grads global_average_pool(GradContext& c) {
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 3) c.fail("the input's rank must be known and at least 3");
  int64_t count = 1;
  std::vector<int64_t> dynamic;
  for (int64_t i = 2; i < r; ++i) {
    const Dim& d = x->type().shape->dims[static_cast<size_t>(i)];
    if (d.is_static())
      count *= *d.value;
    else
      dynamic.push_back(i);
  }
  Value* n = c.b.scalar(static_cast<double>(count), x->dtype());
  if (!dynamic.empty()) {
    Value* dims = c.b.cast(c.b.same("Gather", {c.b.shape_of(x), c.b.int64s(dynamic)}), x->dtype());
    for (size_t i = 0; i < dynamic.size(); ++i)
      n = c.b.mul(n, c.b.same("Gather", {dims, c.b.scalar(static_cast<double>(i), DType::kInt64)}));
  }
  return {c.b.expand(c.b.div(c.dy[0], n), c.b.shape_of(x))};
}

// The elements equal to their plane's max share its gradient (ties split evenly, as ReduceMax's
// gradient and torch.amax's backward do).
Grads global_max_pool(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* x = c.x(0);
  const int64_t r = rank_of(x);
  if (r < 3) c.fail("the input's rank must be known and at least 3");
  std::vector<int64_t> spatial;
  for (int64_t i = 2; i < r; ++i) spatial.push_back(i);
  Value* hit = b.equal(x, c.y(0));
  Value* ties = b.reduce_sum(b.cast(hit, x->dtype()), spatial, true);
  return {b.where(hit, b.expand(b.div(c.dy[0], ties), b.shape_of(x)), b.scalar(0, x->dtype()))};
}

// ai.onnx_amp DeformConv(X, W, offset[, B][, mask]): one DeformConvGrad gives the gradient of each
// input asked for, in the forward's input order.
Grads deform_conv(GradContext& c) {
  const ValueType none;
  const bool masked = c.node.inputs().size() > 4 && c.x(4);
  std::vector<Value*> in = {c.dy[0], c.x(0), c.x(1), c.x(2)};
  if (masked) in.push_back(c.x(4));
  std::vector<ValueType> types;
  for (size_t i = 0; i < 5; ++i) {
    const bool present = i < c.node.inputs().size() && c.x(i);
    types.push_back(present && c.wants(i) ? c.x(i)->type() : none);
  }
  auto outs = c.b.emit("DeformConvGrad", in, types, copy_attributes(c.node), kAmpDomain);
  return {outs[0], outs[1], outs[2], outs[3], outs[4]};
}

// ai.onnx_amp Col2Im(input, image_shape, block_shape): each input element was added to one image
// element (or dropped in the padding), so its gradient is that element of dY: Im2Col. The shapes
// get none.
Grads col2im(GradContext& c) {
  Grads g(3, nullptr);
  g[0] = c.b.emit("Im2Col", {c.dy[0], c.x(2)}, {c.x(0)->type()}, copy_attributes(c.node), kAmpDomain)[0];
  return g;
}

}  // namespace

void add_conv_pool_gradients(GradRuleTable& t) {
  t["Conv"] = conv;
  t["MaxPool"] = pool;
  t["AveragePool"] = pool;
  t["GlobalAveragePool"] = global_average_pool;
  t["GlobalMaxPool"] = global_max_pool;
  t[std::string(kAmpDomain) + ":DeformConv"] = deform_conv;
  t[std::string(kAmpDomain) + ":Col2Im"] = col2im;
}

}  // namespace amp
