// Gradients of the data-movement and indexing ops of issue 31, in standard ONNX ops: Tile sums
// its copies (a Reshape that splits each dim into repeat and extent, then a ReduceSum over the
// repeats); CumSum's is a CumSum the other way; GatherElements, TopK and GatherND place dY back
// where they read (ScatterElements / ScatterND with reduction add, so repeated indices
// accumulate); ScatterElements passes dY to the data but where it wrote and reads the updates'
// share back with GatherElements (with opset 18's max and min, ai.onnx_amp ScatterElements and
// ScatterND, as PyTorch's scatter_reduce amax / amin backward); DepthToSpace and SpaceToDepth undo
// each other's permutation; ReverseSequence is its own inverse; Compress places dY at the kept
// positions (ai.onnx_amp GatherGrad, as Gather's gradient does, at the condition's NonZero
// indices); MaxUnpool's X reads dY back at its indices (a Gather); RoiAlign's X gets ai.onnx_amp
// RoiAlignGrad, GridSample's X and grid ai.onnx_amp GridSampleGrad.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// Tile: dY [r0·d0, r1·d1, ...] seen as [r0, d0, r1, d1, ...] and summed over the repeats.
Grads tile(GradContext& c) {
  GraphBuilder& b = c.b;
  const int64_t r = rank_of(c.x(0));
  if (r < 0) c.fail("the input's rank must be known");
  Grads g(2, nullptr);
  if (r == 0) {
    g[0] = c.dy[0];
    return g;
  }
  Value* repeats = b.unsqueeze(c.x(1), {1});
  Value* dims = b.unsqueeze(b.shape_of(c.x(0)), {1});
  Value* split = b.reshape(b.same("Concat", {repeats, dims}, attrs(Attribute::of_int("axis", 1))), b.int64s({-1}));
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < r; ++d) axes.push_back(2 * d);
  g[0] = b.reduce_sum(b.reshape(c.dy[0], split), axes, false);
  return g;
}

// CumSum: dX_i = Σ_{j ≥ i} dY_j (exclusive: j > i), the running sum in the other direction.
Grads cumsum(GradContext& c) {
  Grads g(2, nullptr);
  g[0] = c.b.same("CumSum", {c.dy[0], c.x(1)},
                  attrs(Attribute::of_int("exclusive", c.node.attr_int("exclusive", 0)),
                        Attribute::of_int("reverse", c.node.attr_int("reverse", 0) ? 0 : 1)));
  return g;
}

// dY added at the positions `indices` names along `axis` into zeros of X's shape.
Value* scatter_add(GradContext& c, Value* x, Value* indices, Value* dy, int64_t axis) {
  return c.b.emit("ScatterElements", {c.b.zeros_like(x), indices, dy}, {x->type()},
                  attrs(Attribute::of_int("axis", axis), Attribute::of_string("reduction", "add")))[0];
}

Grads gather_elements(GradContext& c) {
  Grads g(2, nullptr);
  g[0] = scatter_add(c, c.x(0), c.x(1), c.dy[0], c.node.attr_int("axis", 0));
  return g;
}

// ScatterElements, reduction none: the data's gradient is dY with the written elements zeroed, the
// updates' is dY where they were written (with a repeated index, the last write, which is the
// one that lands, gets it). Reduction add: dY itself and dY where they were added. Reduction mul
// has none here.
Grads scatter_elements(GradContext& c) {
  const std::string reduction = c.node.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") c.fail("no gradient for ScatterElements with reduction '" + reduction + "'");
  const int64_t axis = c.node.attr_int("axis", 0);
  Grads g(3, nullptr);
  if (c.wants(0))
    g[0] = reduction == "add" ? c.dy[0]
                              : c.b.emit("ScatterElements", {c.dy[0], c.x(1), c.b.zeros_like(c.x(2))}, {c.x(0)->type()},
                                         attrs(Attribute::of_int("axis", axis)))[0];
  if (c.wants(2))
    g[2] = c.b.emit("GatherElements", {c.dy[0], c.x(1)}, {c.x(2)->type()}, attrs(Attribute::of_int("axis", axis)))[0];
  return g;
}

// ScatterElements / ScatterND with opset 18's reduction max or min (ai.onnx_amp): PyTorch's
// scatter_reduce backward for amax / amin with include_self: each output element's gradient is
// split evenly among the elements equal to it, the data's element there and every update scattered
// onto it. The updates' positions are read with GatherElements along the axis (ScatterElements,
// `elements`) or GatherND (ScatterND), and counted with the op itself, reduction add.
Grads scatter_extremum(GradContext& c, bool elements) {
  GraphBuilder& b = c.b;
  Value *x = c.x(0), *indices = c.x(1), *updates = c.x(2), *y = c.y(0);
  const int64_t axis = c.node.attr_int("axis", 0);
  auto axis_attrs = [&] { return elements ? attrs(Attribute::of_int("axis", axis)) : std::vector<Attribute>{}; };
  auto at_updates = [&](Value* v) {
    return b.emit(elements ? "GatherElements" : "GatherND", {v, indices}, {updates->type()}, axis_attrs())[0];
  };
  Value* x_is_y = b.cast(b.equal(x, y), x->dtype());
  Value* update_is_y = b.cast(b.equal(updates, at_updates(y)), x->dtype());
  std::vector<Attribute> add = axis_attrs();
  add.push_back(Attribute::of_string("reduction", "add"));
  Value* count = b.emit(c.node.op_type(), {x_is_y, indices, update_is_y}, {x->type()}, std::move(add))[0];
  Value* share = b.div(c.dy[0], count);
  Grads g(3, nullptr);
  if (c.wants(0)) g[0] = b.mul(x_is_y, share);
  if (c.wants(2)) g[2] = b.mul(update_is_y, at_updates(share));
  return g;
}

bool is_extremum(const std::string& reduction) { return reduction == "max" || reduction == "min"; }

// ai.onnx_amp ScatterElements (opset 18's): max and min as above, the other reductions as opset 16's.
Grads scatter_elements_opset18(GradContext& c) {
  if (!is_extremum(c.node.attr_string("reduction", "none"))) return scatter_elements(c);
  return scatter_extremum(c, true);
}

// ai.onnx_amp ScatterND (opset 18's): max and min (the import puts no other reduction here).
Grads scatter_nd_opset18(GradContext& c) {
  const std::string reduction = c.node.attr_string("reduction", "none");
  if (!is_extremum(reduction)) c.fail("no gradient for ScatterND with reduction '" + reduction + "'");
  return scatter_extremum(c, false);
}

// TopK: the values' gradient goes back to the positions the indices (output 1) name.
Grads top_k(GradContext& c) {
  Grads g(2, nullptr);
  if (!c.dy[0]) return g;
  g[0] = scatter_add(c, c.x(0), c.y(1), c.dy[0], c.node.attr_int("axis", -1));
  return g;
}

// GatherND (batch_dims 0): dY's slices added where they were read.
Grads gather_nd(GradContext& c) {
  if (c.node.attr_int("batch_dims", 0) != 0) c.fail("no gradient for GatherND with batch_dims other than 0");
  Grads g(2, nullptr);
  g[0] = c.b.emit("ScatterND", {c.b.zeros_like(c.x(0)), c.x(1), c.dy[0]}, {c.x(0)->type()},
                  attrs(Attribute::of_string("reduction", "add")))[0];
  return g;
}

// DepthToSpace (DCR) and SpaceToDepth are each other's inverse. DepthToSpace CRD reads X as
// [N, C', b, b, H, W] and permutes (0, 1, 4, 2, 5, 3): dY, read as [N, C', H, b, W, b], goes back by
// the inverse permutation (0, 1, 3, 5, 2, 4) and is read as X's shape.
Grads depth_to_space(GradContext& c) {
  GraphBuilder& b = c.b;
  const int64_t bs = c.node.attr_int("blocksize", 0);
  if (c.node.attr_string("mode", "DCR") != "CRD")
    return {b.same("SpaceToDepth", {c.dy[0]}, attrs(Attribute::of_int("blocksize", bs)))};
  Value* shape = b.shape_of(c.x(0));
  auto dim = [&](int64_t i) { return b.same("Gather", {shape, b.int64s({i})}); };
  Value* bv = b.int64s({bs});
  Value* six = b.same("Concat", {dim(0), b.div(dim(1), b.int64s({bs * bs})), dim(2), bv, dim(3), bv},
                      attrs(Attribute::of_int("axis", 0)));
  return {b.reshape(b.transpose(b.reshape(c.dy[0], six), {0, 1, 3, 5, 2, 4}), shape)};
}

Grads space_to_depth(GradContext& c) {
  return {c.b.same("DepthToSpace", {c.dy[0]},
                   attrs(Attribute::of_int("blocksize", c.node.attr_int("blocksize", 0)), Attribute::of_string("mode", "DCR")))};
}

Grads reverse_sequence(GradContext& c) {
  Grads g(2, nullptr);
  g[0] = c.b.emit("ReverseSequence", {c.dy[0], c.x(1)}, {c.x(0)->type()},
                  attrs(Attribute::of_int("time_axis", c.node.attr_int("time_axis", 0)),
                        Attribute::of_int("batch_axis", c.node.attr_int("batch_axis", 1))))[0];
  return g;
}

Grads compress(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* kept = b.reshape(b.op("NonZero", {c.x(1)}, DType::kInt64), b.int64s({-1}));
  Grads g(2, nullptr);
  if (c.node.attr("axis")) {
    g[0] = b.emit("GatherGrad", {c.dy[0], b.shape_of(c.x(0)), kept}, {c.x(0)->type()},
                  attrs(Attribute::of_int("axis", c.node.attr_int("axis", 0))), kAmpDomain)[0];
    return g;
  }
  Value* flat = b.shape_of(b.reshape(c.x(0), b.int64s({-1})));
  Value* gathered = b.emit("GatherGrad", {c.dy[0], flat, kept}, {ValueType::tensor(c.x(0)->dtype())},
                           attrs(Attribute::of_int("axis", 0)), kAmpDomain)[0];
  g[0] = b.reshape(gathered, b.shape_of(c.x(0)));
  return g;
}

// MaxUnpool: each X element's gradient is dY at the output index it was written to (without an
// output_shape, whose padding would move the indices).
Grads max_unpool(GradContext& c) {
  if (c.x(2)) c.fail("no gradient for MaxUnpool with an output_shape");
  Grads g(c.node.inputs().size(), nullptr);
  g[0] = c.b.same("Gather", {c.b.reshape(c.dy[0], c.b.int64s({-1})), c.x(1)});
  return g;
}

// RoiAlign: ai.onnx_amp RoiAlignGrad spreads dY back over the bilinear taps each bin sampled (the
// forward's attributes; mode max also reads X, for the term it took). The regions and batch
// indices get none, as torchvision's roi_align backward gives none: detection models detach
// their proposals.
Grads roi_align(GradContext& c) {
  std::vector<Attribute> a;
  for (const Attribute& at : c.node.attributes()) a.push_back(at.copy_without_graphs());
  std::vector<Value*> in{c.dy[0], c.x(1), c.x(2), c.b.shape_of(c.x(0))};
  if (c.node.attr_string("mode", "avg") == "max") in.push_back(c.x(0));
  Grads g(c.node.inputs().size(), nullptr);
  g[0] = c.b.emit("RoiAlignGrad", in, {c.x(0)->type()}, std::move(a), kAmpDomain)[0];
  return g;
}

// GridSample: ai.onnx_amp GridSampleGrad(dY, X, grid) gives both X's and the grid's gradients (the
// forward's attributes), PyTorch's grid_sampler_2d_backward; only the wanted ones are computed.
Grads grid_sample(GradContext& c) {
  std::vector<Attribute> a;
  for (const Attribute& at : c.node.attributes()) a.push_back(at.copy_without_graphs());
  const ValueType none;
  auto outs = c.b.emit("GridSampleGrad", {c.dy[0], c.x(0), c.x(1)},
                       {c.wants(0) ? c.x(0)->type() : none, c.wants(1) ? c.x(1)->type() : none}, std::move(a), kAmpDomain);
  return {outs[0], outs[1]};
}

}  // namespace

void add_indexing_gradients(GradRuleTable& t) {
  t["Tile"] = tile;
  t["CumSum"] = cumsum;
  t["GatherElements"] = gather_elements;
  t["ScatterElements"] = scatter_elements;
  t[std::string(kAmpDomain) + ":ScatterElements"] = scatter_elements_opset18;
  t[std::string(kAmpDomain) + ":ScatterND"] = scatter_nd_opset18;
  t["TopK"] = top_k;
  t["GatherND"] = gather_nd;
  t["DepthToSpace"] = depth_to_space;
  t["SpaceToDepth"] = space_to_depth;
  t["ReverseSequence"] = reverse_sequence;
  t["Compress"] = compress;
  t["MaxUnpool"] = max_unpool;
  t["RoiAlign"] = roi_align;
  t["GridSample"] = grid_sample;
}

}  // namespace amp
