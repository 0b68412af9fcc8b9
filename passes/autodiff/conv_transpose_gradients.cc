// Gradients of ConvTranspose. Y = ConvTranspose(X, W) is the adjoint of X -> Conv(X, W) with the
// same window, so with that window (strides, dilations, group, the resolved begin pads):
//   dX = Conv(dY, W)                 (W [C, M/g, k...] is read as Conv's [M', C'/g, k...])
//   dW = ConvGrad's dW with its roles swapped: dY := X, X := dY (<Y, dY> = <X, Conv(dY, W)>)
//   dB = dY summed over all but the channel axis.
// The Conv's end pads are the forward's where they give back X's extents (output_padding is below
// the stride and floored away), else the least that do (a larger output_shape only adds pixels no
// input reaches). Needs X's spatial and W's extents
// static (the window depends on them).
#include "graph/ops/conv_transpose.h"
#include "passes/autodiff/gradient_rules.h"

#include "graph/amp_ops.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

std::optional<std::vector<int64_t>> static_dims(const Value* v) {
  return v->type().shape ? v->type().shape->static_dims() : std::nullopt;
}

Grads conv_transpose(GradContext& c) {
  const Value *x = c.x(0), *w = c.x(1);
  const int64_t r = rank_of(x);
  const std::optional<std::vector<int64_t>> wd = static_dims(w);
  if (r < 3 || !wd || static_cast<int64_t>(wd->size()) != r) c.fail("X's rank and W's shape must be known");
  std::vector<int64_t> in;
  for (int64_t i = 2; i < r; ++i) {
    const Dim& d = x->type().shape->dims[static_cast<size_t>(i)];
    if (!d.is_static()) c.fail("X's spatial extents must be static");
    in.push_back(*d.value);
  }
  const ConvTransposeAttrs attrs(c.node);
  const TransposedWindow win = make_transposed_window(attrs, in, std::vector<int64_t>(wd->begin() + 2, wd->end()));
  // Conv(dY) over the output extents must come back to X's extents: the least end pad that does.
  const size_t n = in.size();
  std::vector<int64_t> pads(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t span = (win.kernel[i] - 1) * win.dilations[i] + 1, s = win.strides[i];
    auto reaches = [&](int64_t end) { return (win.out[i] + win.pads_begin[i] + end - span) / s + 1 == in[i]; };
    // The forward's own end pad where it fits (symmetric pads stay symmetric, which cuDNN needs).
    const int64_t end = reaches(win.pads_end[i]) ? win.pads_end[i]
                                                 : std::max<int64_t>(0, s * (in[i] - 1) + span - win.out[i] - win.pads_begin[i]);
    if (!reaches(end))
      c.fail("output_shape leaves more than a stride of pixels no input reaches");
    pads[i] = win.pads_begin[i];
    pads[i + n] = end;
  }
  auto conv_attrs = [&] {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("kernel_shape", win.kernel));
    a.push_back(Attribute::of_ints("strides", win.strides));
    a.push_back(Attribute::of_ints("dilations", win.dilations));
    a.push_back(Attribute::of_ints("pads", pads));
    a.push_back(Attribute::of_int("group", attrs.group));
    return a;
  };
  Grads out(3, nullptr);
  if (c.wants(0)) out[0] = c.b.same("Conv", {c.dy[0], c.x(1)}, conv_attrs());
  if (c.wants(1)) {
    const ValueType none;
    out[1] = c.b.emit("ConvGrad", {c.x(0), c.dy[0], c.x(1)}, {none, c.x(1)->type(), none}, conv_attrs(), kAmpDomain)[1];
  }
  if (c.wants(2)) {
    std::vector<int64_t> axes = {0};
    for (int64_t i = 2; i < r; ++i) axes.push_back(i);
    out[2] = c.b.reduce_sum(c.dy[0], axes, false);
  }
  return out;
}

}  // namespace

void add_conv_transpose_gradients(GradRuleTable& t) { t["ConvTranspose"] = conv_transpose; }

}  // namespace amp
