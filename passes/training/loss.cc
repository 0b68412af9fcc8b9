#include "passes/training/loss.h"

#include "graph/error.h"
#include "passes/graph_builder.h"

namespace amp {

std::optional<LossKind> loss_kind_from_name(const std::string& name) {
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "mse") return LossKind::kMse;
  if (name == "bce_with_logits") return LossKind::kBceWithLogits;
  return std::nullopt;
}

const char* loss_kind_name(LossKind k) {
  switch (k) {
    case LossKind::kCrossEntropy: return "cross_entropy";
    case LossKind::kMse: return "mse";
    case LossKind::kBceWithLogits: return "bce_with_logits";
  }
  return "?";
}

namespace {

std::string output_names(const Graph& g) {
  std::string s;
  for (const Value* v : g.outputs()) s += (s.empty() ? "'" : ", '") + v->name() + "'";
  return s;
}

Value* find_target(const Model& m, const LossSpec& spec) {
  const Graph& g = *m.graph;
  if (!spec.target.empty()) {
    for (Value* v : g.outputs())
      if (v->name() == spec.target) return v;
    throw InputError(m.path + ": the model has no output '" + spec.target + "' (outputs: " + output_names(g) + ")");
  }
  if (g.outputs().size() != 1)
    throw InputError(m.path + ": the model has " + std::to_string(g.outputs().size()) +
                     " outputs; name the one to train with --target (outputs: " + output_names(g) + ")");
  return g.outputs()[0];
}

// Cross entropy over the last axis: rows of class scores against int64 class indices.
Value* cross_entropy(GraphBuilder& b, Value* x, Value* labels) {
  const int64_t r = rank_of(x);
  if (r > 2) {
    x = b.same("Flatten", {x}, attrs(Attribute::of_int("axis", r - 1)));
    labels = b.reshape(labels, b.int64s({-1}));
  }
  return b.same("SoftmaxCrossEntropyLoss", {x, labels}, attrs(Attribute::of_string("reduction", "mean")));
}

// fp32, or fp64 when the model computes in fp64 (gradient checks).
DType loss_type(const Value* target) { return target->dtype() == DType::kDouble ? DType::kDouble : DType::kFloat; }

Value* mean(GraphBuilder& b, Value* x) { return b.same("ReduceMean", {x}, attrs(Attribute::of_int("keepdims", 0))); }

Value* mse(GraphBuilder& b, Value* x, Value* t) {
  Value* d = b.sub(x, t);
  return mean(b, b.mul(d, d));
}

// max(x, 0) - x t + log(1 + exp(-|x|)): never exponentiates a positive number.
Value* bce_with_logits(GraphBuilder& b, Value* x, Value* t) {
  Value* softplus_tail = b.log(b.add(b.scalar(1, x->dtype()), b.exp(b.neg(b.same("Abs", {x})))));
  return mean(b, b.add(b.sub(b.same("Relu", {x}), b.mul(x, t)), softplus_tail));
}

}  // namespace

LossInfo add_loss(Model& m, const LossSpec& spec) {
  Graph& g = *m.graph;
  Value* target = find_target(m, spec);
  LossInfo info;
  if (!spec.kind) {
    const int64_t r = rank_of(target);
    const bool scalar = r == 0 || (r == 1 && target->type().shape->dims[0].value == 1);
    if (!is_floating(target->dtype()) || !scalar)
      throw InputError(m.path + ": output '" + target->name() + "' (" + target->type().str() +
                       ") is not a scalar loss; append one with --loss cross_entropy|mse|bce_with_logits");
    GraphBuilder b(g);
    info.loss = b.cast(target, loss_type(target));
    if (info.loss != target) g.add_output(info.loss);
    return info;
  }
  const int64_t r = rank_of(target);
  if (!is_floating(target->dtype()) || r < 1)
    throw InputError(m.path + ": output '" + target->name() + "' (" + target->type().str() +
                     ") cannot take a " + loss_kind_name(*spec.kind) + " loss: it needs a float tensor of known rank");
  if (g.lookup(spec.labels))
    throw InputError(m.path + ": the labels name '" + spec.labels +
                     "' is already a value of the model; choose another with --labels");
  GraphBuilder b(g);
  const DType t = loss_type(target);
  Value* x = b.cast(target, t);
  info.target = target;
  if (*spec.kind == LossKind::kCrossEntropy) {
    if (r < 2)
      throw InputError(m.path + ": cross entropy needs class scores of rank >= 2, output '" + target->name() +
                       "' is " + target->type().str());
    Shape s = *target->type().shape;
    s.dims.pop_back();
    info.labels = g.add_input(spec.labels, ValueType::tensor(DType::kInt64, s));
    info.loss = cross_entropy(b, x, info.labels);
    info.classification = true;
  } else {
    info.labels = g.add_input(spec.labels, ValueType::tensor(t, target->type().shape));
    info.loss = *spec.kind == LossKind::kMse ? mse(b, x, info.labels) : bce_with_logits(b, x, info.labels);
  }
  info.loss->set_type(ValueType::tensor(t, Shape::of({})));
  g.rename_value(info.loss, g.fresh_name("loss"));
  g.add_output(info.loss);
  return info;
}

Value* add_correct_count(Graph& g, const LossInfo& info) {
  if (!info.classification || !info.target || !info.labels) return nullptr;
  GraphBuilder b(g);
  Value* best = b.op("ArgMax", {info.target}, DType::kInt64,
                     attrs(Attribute::of_int("axis", -1), Attribute::of_int("keepdims", 0)));
  Value* hits = b.cast(b.equal(best, info.labels), DType::kFloat);
  Value* correct = b.reduce_sum(hits, {}, false);
  correct->set_type(ValueType::tensor(DType::kFloat, Shape::of({})));
  g.rename_value(correct, g.fresh_name("correct"));
  g.add_output(correct);
  return correct;
}

}  // namespace amp
