// Gradients of Softmax, LogSoftmax and the two ONNX classification losses. The losses' gradients
// scatter into the label's class, which standard ONNX cannot express: ai.onnx_amp ops.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// softmax: dX = Y (dY - sum(dY Y)) along the axis, as one ai.onnx_amp SoftmaxGrad: a backend
// then reads Y and dY once (the attention matrix, the largest tensor of a transformer's step).
Grads softmax(GradContext& c) {
  Value* y = c.y(0);
  return {c.b.emit("SoftmaxGrad", {c.dy[0], y}, {y->type()}, attrs(Attribute::of_int("axis", c.node.attr_int("axis", -1))),
                   kAmpDomain)[0]};
}

// log_softmax: dX = dY - exp(Y) sum(dY) along the axis.
Value* log_softmax_grad(GraphBuilder& b, Value* dy, Value* y, int64_t axis) {
  return b.sub(dy, b.mul(b.exp(y), b.reduce_sum(dy, {axis}, true)));
}

Grads log_softmax(GradContext& c) { return {log_softmax_grad(c.b, c.dy[0], c.y(0), c.node.attr_int("axis", -1))}; }

std::vector<Attribute> loss_attributes(const Node& n) {
  std::vector<Attribute> a = attrs(Attribute::of_string("reduction", n.attr_string("reduction", "mean")));
  if (n.attr("ignore_index")) a.push_back(Attribute::of_int("ignore_index", n.attr_int("ignore_index", 0)));
  return a;
}

Grads classification_loss(GradContext& c, const std::string& grad_op) {
  Grads g(c.node.inputs().size());
  Value* scores = c.x(0);
  Value* dscores = nullptr;
  if (c.dy[0]) {
    std::vector<Value*> in{c.dy[0], scores, c.x(1)};
    if (c.x(2)) in.push_back(c.x(2));
    dscores = c.b.emit(grad_op, in, {scores->type()}, loss_attributes(c.node), kAmpDomain)[0];
  }
  if (c.dy.size() > 1 && c.dy[1]) {  // SoftmaxCrossEntropyLoss's log_prob output is read too
    Value* d = log_softmax_grad(c.b, c.dy[1], c.y(1), 1);
    dscores = dscores ? c.b.add(dscores, d) : d;
  }
  g[0] = dscores;
  return g;
}

Grads softmax_cross_entropy(GradContext& c) { return classification_loss(c, "SoftmaxCrossEntropyLossGrad"); }
Grads negative_log_likelihood(GradContext& c) { return classification_loss(c, "NegativeLogLikelihoodLossGrad"); }

}  // namespace

void add_softmax_loss_gradients(GradRuleTable& t) {
  t["Softmax"] = softmax;
  t["LogSoftmax"] = log_softmax;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
  t["NegativeLogLikelihoodLoss"] = negative_log_likelihood;
}

}  // namespace amp
