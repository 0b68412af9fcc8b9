// Gradients of Pad, Resize and ScatterND (issue 16: DenseNet's, Inception v3's and MaxViT's Pad; the
// Resize of upsampling heads; Swin's ScatterND). Graphs reach autodiff at the canonical opset, so Pad's amounts are its input 1.
#include "graph/amp_ops.h"
#include "graph/onnx_io.h"
#include "graph/ops/pad.h"
#include "graph/ops/resize.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// Constant-mode Pad by p is undone by a constant-mode Pad by -p with 0: what was padded is cropped,
// and what was cropped (negative amounts) gets a zero gradient — PyTorch's constant_pad_nd
// backward, which pads the gradient by the negated amounts. The other modes read some input
// elements more than once; their gradients sum those reads (ai.onnx_amp PadGrad).
Grads pad(GradContext& c) {
  const PadMode mode = pad_mode(c.node);
  Value* pads = c.x(1);
  if (!pads) c.fail("Pad without its pads input");
  Value* negated = c.b.neg(pads);
  std::vector<Value*> in{c.dy[0], negated};
  if (mode == PadMode::kConstant) {
    in.push_back(c.b.scalar(0, c.x(0)->dtype()));
    if (c.x(3)) in.push_back(c.x(3));
    return {c.b.emit("Pad", in, {c.x(0)->type()})[0]};
  }
  std::vector<Value*> grad_in{c.dy[0], pads, c.b.shape_of(c.x(0))};
  if (c.x(3)) grad_in.push_back(c.x(3));
  return {c.b.emit("PadGrad", grad_in, {c.x(0)->type()}, attrs(Attribute::of_string("mode", pad_mode_name(mode))),
                   kAmpDomain)[0]};
}

// Resize: ai.onnx_amp ResizeGrad with the forward node's attributes, X's shape and its scales (the
// axis scales come from the shapes when Resize had sizes). roi, scales and sizes get none.
Grads resize(GradContext& c) {
  (void)resize_attrs(c.node, kCanonicalOpset);  // names a mode without a gradient here, as the forward does
  std::vector<Value*> in{c.dy[0], c.b.shape_of(c.x(0))};
  if (Value* scales = c.x(2)) in.push_back(scales);
  std::vector<Attribute> a;
  a.push_back(Attribute::of_string("mode", c.node.attr_string("mode", "nearest")));
  a.push_back(Attribute::of_string("coordinate_transformation_mode",
                                   c.node.attr_string("coordinate_transformation_mode", "half_pixel")));
  a.push_back(Attribute::of_string("nearest_mode", c.node.attr_string("nearest_mode", "round_prefer_floor")));
  a.push_back(Attribute::of_float("cubic_coeff_a", c.node.attr_float("cubic_coeff_a", -0.75f)));
  a.push_back(Attribute::of_int("exclude_outside", c.node.attr_int("exclude_outside", 0)));
  Grads g(c.node.inputs().size(), nullptr);
  g[0] = c.b.emit("ResizeGrad", in, {c.x(0)->type()}, std::move(a), kAmpDomain)[0];
  return g;
}

// ScatterND (reduction none): the data's gradient is dY with the written elements zeroed (a
// ScatterND of zeros); the updates' is dY where they were written, GatherND(dY, indices) (with a
// repeated index, every copy reads the one element). Swin's attention mask, its one use in the
// zoo, is built from constants and needs neither.
Grads scatter_nd(GradContext& c) {
  if (c.node.attr_string("reduction", "none") != "none")
    c.fail("no gradient for ScatterND with reduction '" + c.node.attr_string("reduction", "none") + "'");
  Grads g(3, nullptr);
  if (c.wants(0)) g[0] = c.b.emit("ScatterND", {c.dy[0], c.x(1), c.b.zeros_like(c.x(2))}, {c.x(0)->type()})[0];
  if (c.wants(2)) g[2] = c.b.emit("GatherND", {c.dy[0], c.x(1)}, {c.x(2)->type()})[0];
  return g;
}

}  // namespace

void add_pad_resize_gradients(GradRuleTable& t) {
  t["Pad"] = pad;
  t["Resize"] = resize;
  t["ScatterND"] = scatter_nd;
}

}  // namespace amp
