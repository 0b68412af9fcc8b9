#include "backends/cuda/batch_norm_relu_fusion.h"

#include <algorithm>
#include <optional>

#include "backends/cuda/batch_norm_relu.cuh"
#include "backends/cuda/channels_last_operands.h"
#include "backends/cuda/node_patterns.h"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {

ChannelGeometry channel_geometry(const TensorDesc& x) {
  if (x.dims.size() < 2) throw InputError("BatchNormalization needs [N, C, ...] input");
  int64_t rest = 1;
  for (size_t d = 2; d < x.dims.size(); ++d) rest *= x.dims[d];
  if (x.channels_last) return {x.dims[0] * rest, x.dims[1], 1};
  return {x.dims[0], x.dims[1], rest};
}

BatchNormReluForward bound_batch_norm(const BatchNormReluForward& a, const OpBuffers& b, bool mean, bool var) {
  BatchNormReluForward run = a;
  run.x = b.in[0];
  run.scale = static_cast<const float*>(b.in[1]);
  run.bias = static_cast<const float*>(b.in[2]);
  run.mean_in = static_cast<const float*>(b.in[3]);
  run.var_in = static_cast<const float*>(b.in[4]);
  run.y = b.out[0];
  run.mean_out = mean ? static_cast<float*>(b.out[1]) : nullptr;
  run.var_out = var ? static_cast<float*>(b.out[2]) : nullptr;
  return run;
}

namespace {

void expect_float_channels(const OpShapes& s, std::initializer_list<size_t> inputs, int64_t channels) {
  for (size_t i : inputs)
    if (s.in[i]->dtype != DType::kFloat || s.in[i]->numel() != channels)
      throw InputError("BatchNormalization's scale, bias and statistics must be float, one per channel");
}

// Operands: 0 x, 1 scale, 2 B, 3 input_mean, 4 input_var, 5 z (absent without the Add, or when
// the shortcut's BatchNorm makes it), 6-10 the shortcut BatchNorm's x, scale, B, input_mean and
// input_var (absent without it). Results: 0 y, 1 running_mean, 2 running_var (either may be
// absent), 3 the mask's bits (absent when its readers need it as bool), 4 and 5 the shortcut's
// running_mean and running_var.
class BatchNormRelu final : public CudaOp {
 public:
  explicit BatchNormRelu(const Node& bn)
      : epsilon_(bn.attr_float("epsilon", 1e-5f)), momentum_(bn.attr_float("momentum", 0.9f)) {}

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& x = *s.in[0];
    one_layout(s, {0, 5, 6}, {0}, "the fused BatchNorm");
    const ChannelGeometry g = channel_geometry(x);
    expect_float_channels(s, {1, 2, 3, 4}, g.channels);
    for (size_t i : {5, 6})
      if (s.out[0]->dtype != x.dtype || (s.has_in(i) && (s.in[i]->dtype != x.dtype || s.in[i]->dims != x.dims)))
        throw InputError("x, the residual and y must share one type and shape");
    const bool shortcut = s.has_in(6);
    if (shortcut) expect_float_channels(s, {7, 8, 9, 10}, g.channels);
    BatchNormReluForward a;
    a.t = x.dtype;
    a.g = g;
    a.epsilon = epsilon_;
    a.momentum = momentum_;
    const bool z = s.has_in(5), mean = s.has_out(1), var = s.has_out(2), bits = s.has_out(3);
    const bool mean2 = s.has_out(4), var2 = s.has_out(5);
    const int sm = ctx.sm_count();
    return std::make_unique<PreparedFunction>(
        [a, z, mean, var, bits, shortcut, mean2, var2, sm](const OpBuffers& b, DeviceContext& c) {
          BatchNormReluForward run = bound_batch_norm(a, b, mean, var);
          run.z = z ? b.in[5] : nullptr;
          run.bits = bits ? static_cast<uint32_t*>(b.out[3]) : nullptr;
          if (shortcut) {
            run.x2 = b.in[6];
            run.scale2 = static_cast<const float*>(b.in[7]);
            run.bias2 = static_cast<const float*>(b.in[8]);
            run.mean2_in = static_cast<const float*>(b.in[9]);
            run.var2_in = static_cast<const float*>(b.in[10]);
            run.mean2_out = mean2 ? static_cast<float*>(b.out[4]) : nullptr;
            run.var2_out = var2 ? static_cast<float*>(b.out[5]) : nullptr;
          }
          batch_norm_relu_forward(run, b.workspace, sm, c.stream());
        },
        batch_norm_relu_workspace(g, sm));
  }
  size_t packed_output_bytes(const OpShapes& s, size_t output) const override {
    return output == 3 ? relu_bits_bytes(s.out[0]->numel()) : 0;
  }
  // x, z, the shortcut's x, y and the mask's bits (then in NHWC element order).
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    return channels_last_case(*s.in[0]) ? listed_operands(s, {0, 5, 6}, {0, 3}) : ChannelsLastOperands{};
  }

 private:
  float epsilon_, momentum_;
};

// Operands: 0 dY, 1 the mask's bits (from_sums: the forward's statistics, BatchNormSums, from
// which the mask is recomputed), 2 x, 3 scale, 4 a second dY the unit adds to the first (the
// absorbed Add of two gradient contributions; absent without it), 5 and 6 the shortcut
// BatchNorm's x and scale (absent without it), 7 B (from_sums only). Results: 0 dX, 1 dscale, 2 dB (either may be
// absent), 3 Where's result (absent when only this unit reads it), 4-6 the shortcut's dX,
// dscale and dB.
class BatchNormReluGrad final : public CudaOp {
 public:
  BatchNormReluGrad(const Node& grad, bool from_sums)
      : epsilon_(grad.attr_float("epsilon", 1e-5f)), from_sums_(from_sums) {}

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& x = *s.in[2];
    one_layout(s, {2, 0, 4, 5}, {0, 3, 4}, "the fused BatchNorm gradient");
    const ChannelGeometry g = channel_geometry(x);
    expect_float_channels(s, {3}, g.channels);
    if (s.in[0]->dtype != x.dtype || s.in[0]->dims != x.dims || s.out[0]->dtype != x.dtype ||
        (s.has_in(4) && (s.in[4]->dtype != x.dtype || s.in[4]->dims != x.dims)) ||
        (s.has_in(5) && (s.in[5]->dtype != x.dtype || s.in[5]->dims != x.dims)) ||
        (s.has_out(4) && s.out[4]->dtype != x.dtype))
      throw InputError("dY, x and dX must share one type and shape");
    const bool shortcut = s.has_in(5), from_sums = from_sums_;
    if (shortcut) expect_float_channels(s, {6}, g.channels);
    if (from_sums && (shortcut || !s.has_in(7)))
      throw InputError("a mask recomputed from statistics needs B and no shortcut");
    if (from_sums) expect_float_channels(s, {7}, g.channels);
    for (size_t k : {1, 2, 5, 6})
      if (s.has_out(k) && s.out[k]->dtype != DType::kFloat)
        throw InputError("BatchNormalizationGrad's parameter gradients must be float");
    BatchNormReluBackward a;
    a.t = x.dtype;
    a.g = g;
    a.epsilon = epsilon_;
    const bool dscale = s.has_out(1), dbias = s.has_out(2), dg = s.has_out(3), dy2 = s.has_in(4);
    const bool dx2 = s.has_out(4), dscale2 = s.has_out(5), dbias2 = s.has_out(6);
    const int sm = ctx.sm_count();
    return std::make_unique<PreparedFunction>(
        [a, dscale, dbias, dg, dy2, shortcut, dx2, dscale2, dbias2, from_sums, sm](const OpBuffers& b,
                                                                                    DeviceContext& c) {
          BatchNormReluBackward run = a;
          run.dy = b.in[0];
          run.dy2 = dy2 ? b.in[4] : nullptr;
          if (from_sums) {
            run.sums = static_cast<const float*>(b.in[1]);
            run.bias = static_cast<const float*>(b.in[7]);
          } else {
            run.bits = static_cast<const uint32_t*>(b.in[1]);
          }
          run.x = b.in[2];
          run.scale = static_cast<const float*>(b.in[3]);
          run.dx = b.out[0];
          run.dscale = dscale ? static_cast<float*>(b.out[1]) : nullptr;
          run.dbias = dbias ? static_cast<float*>(b.out[2]) : nullptr;
          run.dg = dg ? b.out[3] : nullptr;
          if (shortcut) {
            run.x2 = b.in[5];
            run.scale2 = static_cast<const float*>(b.in[6]);
            run.dx2 = dx2 ? b.out[4] : nullptr;
            run.dscale2 = dscale2 ? static_cast<float*>(b.out[5]) : nullptr;
            run.dbias2 = dbias2 ? static_cast<float*>(b.out[6]) : nullptr;
          }
          batch_norm_relu_backward(run, b.workspace, sm, c.stream());
        },
        batch_norm_relu_workspace(g, sm));
  }
  size_t packed_input_bytes(const OpShapes& s, size_t input) const override {
    if (input != 1) return 0;
    return from_sums_ ? batch_norm_sums_bytes(s.in[2]->dims.size() > 1 ? s.in[2]->dims[1] : 0)
                      : relu_bits_bytes(s.in[2]->numel());
  }
  // dY, the bits (in the forward's element order; never the statistics of from_sums), x, the second
  // dY, the shortcut's x; dX, Where's result and the shortcut's dX.
  ChannelsLastOperands channels_last(const OpShapes& s) const override {
    if (!channels_last_case(*s.in[2])) return {};
    return from_sums_ ? listed_operands(s, {0, 2}, {0}) : listed_operands(s, {0, 1, 2, 4, 5}, {0, 3, 4});
  }

 private:
  float epsilon_;
  bool from_sums_;
};

bool is_amp_op(const Node* n, const char* op) { return n && n->domain() == kAmpDomain && n->op_type() == op; }

bool float_types(const Value* v) {
  const DType t = v->dtype();
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16;
}

// A training-mode BatchNormalization of x of type t with fp32 parameters and statistics.
bool training_batch_norm(const Node* bn, DType t, const std::function<bool(const Node*)>& busy) {
  if (!is_op(bn, "BatchNormalization") || busy(bn) || bn->attr_int("training_mode", 0) == 0 ||
      bn->inputs().size() < 5 || bn->input(0)->dtype() != t || bn->output(0)->dtype() != t)
    return false;
  for (size_t i = 1; i < 5; ++i)
    if (!bn->input(i) || bn->input(i)->dtype() != DType::kFloat) return false;
  return true;
}

// The shortcut of a downsampling block, z = BatchNormalization(x2) read by nothing but the Add,
// with bn's epsilon and momentum (the kernels take one of each): the unit normalises x2 too and
// never stores z.
const Node* shortcut_of(const Value* z, const Node* add, const Node* bn, const std::function<bool(const Node*)>& busy) {
  const Node* s = z->producer();
  if (!training_batch_norm(s, z->dtype(), busy) || only_reader(z) != add) return nullptr;
  for (const char* attr : {"epsilon", "momentum"})
    if (s->attr_float(attr, 0.0f) != bn->attr_float(attr, 0.0f)) return nullptr;
  return s;
}

// The backward half: Greater(y, 0) whose one reader is Where(mask, dY, 0), whose result is dY of
// a BatchNormalizationGrad of x and scale (and of the shortcut's, when there is one); and the Add
// that made dY, when it sums two gradients of y's shape and nothing else reads it (the residual
// block's input gets its gradient from both branches: the unit reads the two, and the sum is
// never stored).
struct Backward {
  const Node *greater = nullptr, *where = nullptr, *grad = nullptr, *sum = nullptr, *shortcut_grad = nullptr;
};

const Node* gradient_sum(const Value* dy, const Node* where, const std::function<bool(const Node*)>& busy) {
  const Node* add = dy->producer();
  if (!is_op(add, "Add") || busy(add) || only_reader(dy) != where) return nullptr;
  for (const Value* v : add->inputs())
    if (!v || v->dtype() != dy->dtype() || !same_static_shape(v, dy)) return nullptr;
  return add;
}

// The BatchNormalizationGrad of `bn` among g's readers, reading g as its dY.
const Node* gradient_of(const Node* bn, const Value* g, const std::function<bool(const Node*)>& busy) {
  for (const Use& u : g->uses()) {
    const Node* grad = u.node;
    if (is_amp_op(grad, "BatchNormalizationGrad") && u.index == 0 && !busy(grad) && grad->output(0) &&
        grad->input(1) == bn->input(0) && grad->input(2) == bn->input(1) &&
        grad->attr_float("epsilon", 1e-5f) == bn->attr_float("epsilon", 1e-5f))
      return grad;
  }
  return nullptr;
}

std::optional<Backward> backward_of(const Node* bn, const Node* shortcut, const Value* y,
                                    const std::function<bool(const Node*)>& busy) {
  const DType t = y->dtype();
  for (const Use& u : y->uses()) {
    const Node* greater = u.node;
    if (!is_op(greater, "Greater") || busy(greater) || greater->input(0) != y || !is_zero_constant(greater->input(1)))
      continue;
    const Value* mask = greater->output(0);
    if (mask->is_output() || mask->uses().size() != 1) continue;
    const Use& m = mask->uses().front();
    const Node* where = m.node;
    if (!is_op(where, "Where") || busy(where) || m.index != 0 || where->input(1) == mask ||
        !is_zero_constant(where->input(2)) || where->input(1)->dtype() != t || where->output(0)->dtype() != t ||
        where->output(0)->is_output())
      continue;
    if (const Node* grad = gradient_of(bn, where->output(0), busy))
      return Backward{greater, where, grad, gradient_sum(where->input(1), where, busy),
                      shortcut ? gradient_of(shortcut, where->output(0), busy) : nullptr};
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<CudaOp> batch_norm_relu_grad_from_sums(const Node& grad) {
  return std::make_unique<BatchNormReluGrad>(grad, true);
}

std::vector<UnitMatch> match_batch_norm_relu(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<UnitMatch> out;
  std::vector<const Node*> taken;
  auto busy = [&](const Node* n) { return excluded(n) || std::find(taken.begin(), taken.end(), n) != taken.end(); };
  for (const Node* bn : g.nodes()) {
    if (!bn->inputs().size() || !bn->input(0) || !float_types(bn->input(0))) continue;
    const DType t = bn->input(0)->dtype();
    if (!training_batch_norm(bn, t, busy)) continue;
    UnitMatch f;
    f.nodes = {bn};
    const Value* result = bn->output(0);
    const Value* z = nullptr;
    const Node* shortcut = nullptr;
    const Node* add = only_reader(result);
    if (is_op(add, "Add") && !busy(add) && add->input(0) != add->input(1) && add->output(0)->dtype() == t) {
      const Value* other = add->input(0) == result ? add->input(1) : add->input(0);
      if (other->dtype() == t && same_static_shape(other, result)) {
        f.nodes.push_back(add);
        result = add->output(0);
        shortcut = shortcut_of(other, add, bn, busy);
        if (shortcut) f.nodes.push_back(shortcut);
        else z = other;
      }
    }
    const Node* relu = only_reader(result);
    if (!is_op(relu, "Relu") || busy(relu) || relu->output(0)->dtype() != t) continue;
    f.nodes.push_back(relu);
    const Value* y = relu->output(0);
    const std::optional<Backward> back = backward_of(bn, shortcut, y, busy);
    const Value* bits = nullptr;
    if (back) {
      f.nodes.push_back(back->greater);
      bits = back->greater->output(0);
    }
    auto output = [](const Node* n, size_t k) { return n && n->outputs().size() > k ? n->output(k) : nullptr; };
    auto input = [](const Node* n, size_t i) { return n ? n->input(i) : nullptr; };
    f.inputs = {bn->input(0), bn->input(1), bn->input(2), bn->input(3), bn->input(4), z};
    for (size_t i = 0; i < 5; ++i) f.inputs.push_back(input(shortcut, i));
    f.outputs = {y, output(bn, 1), output(bn, 2), bits, output(shortcut, 1), output(shortcut, 2)};
    f.op = std::make_unique<BatchNormRelu>(*bn);
    taken.insert(taken.end(), f.nodes.begin(), f.nodes.end());
    out.push_back(std::move(f));
    if (!back) continue;
    UnitMatch b;
    const Node* grad = back->grad;
    const Node* grad2 = back->shortcut_grad;
    b.nodes = {grad, back->where};
    if (back->sum) b.nodes.push_back(back->sum);
    if (grad2) b.nodes.push_back(grad2);
    // Where's result leaves the unit when a node other than the unit's gradients reads it.
    const Value* g_value = back->where->output(0);
    bool read_elsewhere = false;
    for (const Use& u : g_value->uses())
      read_elsewhere = read_elsewhere || (u.node != grad && u.node != grad2 && !is_op(u.node, "Shape") &&
                                          !is_op(u.node, "Size"));
    const Value* dy = back->sum ? back->sum->input(0) : back->where->input(1);
    const Value* dy2 = back->sum ? back->sum->input(1) : nullptr;
    b.inputs = {dy, bits, bn->input(0), bn->input(1), dy2, input(grad2 ? shortcut : nullptr, 0),
                input(grad2 ? shortcut : nullptr, 1)};
    b.outputs = {output(grad, 0), output(grad, 1), output(grad, 2), read_elsewhere ? g_value : nullptr,
                 output(grad2, 0), output(grad2, 1), output(grad2, 2)};
    b.op = std::make_unique<BatchNormReluGrad>(*grad, false);
    taken.insert(taken.end(), b.nodes.begin(), b.nodes.end());
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace amp::cuda
