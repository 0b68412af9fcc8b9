#include "passes/autodiff/gradient_rules.h"

#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp {

const GradRuleTable& gradient_rules() {
  static const GradRuleTable table = [] {
    GradRuleTable t;
    add_elementwise_gradients(t);
    add_broadcast_gradients(t);
    add_matmul_gradients(t);
    add_conv_pool_gradients(t);
    add_conv_transpose_gradients(t);
    add_normalization_gradients(t);
    add_softmax_loss_gradients(t);
    add_shape_gradients(t);
    add_reduce_gradients(t);
    add_zoo_activation_gradients(t);
    add_pad_resize_gradients(t);
    add_einsum_gradients(t);
    add_attention_gradients(t);
    add_recurrent_gradients(t);
    add_indexing_gradients(t);
    return t;
  }();
  return table;
}

const std::unordered_set<std::string>& non_differentiable_ops() {
  static const std::unordered_set<std::string> ops = {
      "Shape", "Constant", "ConstantOfShape", "Range", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
      "Not", "And", "Or", "Xor", "Trilu", "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf", "BitShift", "NonZero",
      // integer bit operations (opset 18; ai.onnx_amp after the import): no float input or output
      "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
      "EyeLike", "Hardmax", "NonMaxSuppression", "Unique",
      // random draws: their inputs give a shape or a probability, never a differentiable path
      "RandomNormalLike", "RandomUniformLike", "Bernoulli",
      // integer (quantized) arithmetic: piecewise constant in every float input, no gradient
      "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"};
  return ops;
}

void GradContext::fail(const std::string& why) const {
  throw InputError("gradient of node " + node.label() + " (op " + node.op_type() + "): " + why);
}

Value* GradContext::sum_to_input(Value* g, size_t i, int64_t own_dims) {
  Value* in = x(i);
  const Value* out = y(0);
  const int64_t rx = rank_of(in), ry = rank_of(out);
  // Shapes known only at run time: one op that sums down to the input's run-time shape.
  auto at_run_time = [&] { return b.emit("SumToShape", {g, b.shape_of(in)}, {in->type()}, {}, kAmpDomain)[0]; };
  if (rx < 0 || ry < 0) return at_run_time();
  const auto& xd = in->type().shape->dims;
  const auto& yd = out->type().shape->dims;
  const int64_t lead = ry - rx;
  if (lead < 0) return at_run_time();
  std::vector<int64_t> inner;
  for (int64_t j = 0; j < rx - own_dims; ++j) {
    const Dim& a = xd[static_cast<size_t>(j)];
    const Dim& r = yd[static_cast<size_t>(lead + j)];
    const bool x_one = a.is_static() && *a.value == 1, y_one = r.is_static() && *r.value == 1;
    if (x_one && !y_one) {
      inner.push_back(lead + j);
      continue;
    }
    const bool same = (a.is_static() && r.is_static() && *a.value == *r.value) ||
                      (!a.param.empty() && a.param == r.param) || y_one || (a.is_static() && *a.value != 1);
    if (!same) return at_run_time();
  }
  Value* r = g;
  if (!inner.empty()) r = b.reduce_sum(r, inner, true);
  if (lead > 0) {
    std::vector<int64_t> leading;
    for (int64_t j = 0; j < lead; ++j) leading.push_back(j);
    r = b.reduce_sum(r, leading, false);
  }
  if (r != g) r->set_type(in->type());
  return r;
}

}  // namespace amp
