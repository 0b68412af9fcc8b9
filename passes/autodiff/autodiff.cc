#include "passes/autodiff/autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "passes/autodiff/complete_shapes.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

bool differentiable(const Value* v) { return v && is_floating(v->dtype()); }

// Dropout's gradient needs the kept-elements mask, an optional output.
void ensure_dropout_mask(Graph& g, Node* n) {
  if (n->op_type() != "Dropout" || !n->input(2) || n->output(1)) return;
  ValueType mask_type = n->output(0)->type();
  mask_type.elem = DType::kBool;
  const std::string mask_name = g.fresh_name(n->output(0)->name() + "_mask");
  if (n->outputs().size() < 2) {
    g.add_node_output(n, mask_name)->set_type(mask_type);
    return;
  }
  // The mask slot exists but is absent: a new node takes the old one's place.
  Value* old = n->output(0);
  const std::string name = old->name();
  Node* m = g.add_node("Dropout", n->inputs(), {name + "_tmp", mask_name}, "", n);
  m->name = n->name;
  if (n->attr("seed")) m->set_attr(Attribute::of_int("seed", n->attr_int("seed", 0)));
  m->output(0)->set_type(old->type());
  m->output(1)->set_type(mask_type);
  g.replace_all_uses(old, m->output(0));
  g.remove_node(n);
  g.rename_value(m->output(0), name);
}

}  // namespace

std::vector<Value*> build_gradients(Graph& g, Value* loss, Value* seed, const std::vector<Value*>& wrt) {
  complete_shapes(g);
  for (Node* n : g.node_vector()) ensure_dropout_mask(g, n);
  const std::vector<Node*> forward = g.node_vector();
  const std::unordered_set<const Node*> forward_nodes(forward.begin(), forward.end());

  // Values that depend on a wrt value, and values the loss depends on: gradients flow through
  // the nodes on both sides.
  std::unordered_set<const Value*> depends_on_wrt(wrt.begin(), wrt.end());
  for (Node* n : forward) {
    if (non_differentiable_ops().count(n->op_type())) continue;
    bool active = false;
    for (Value* v : n->inputs()) active = active || (v && depends_on_wrt.count(v));
    if (!active) continue;
    for (Value* v : n->outputs())
      if (differentiable(v)) depends_on_wrt.insert(v);
  }
  std::unordered_set<const Value*> loss_depends_on{loss};
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    bool needed = false;
    for (Value* v : (*it)->outputs()) needed = needed || (v && loss_depends_on.count(v));
    if (!needed) continue;
    for (Value* v : (*it)->inputs())
      if (v) loss_depends_on.insert(v);
  }
  auto on_path = [&](const Value* v) { return differentiable(v) && depends_on_wrt.count(v) && loss_depends_on.count(v); };

  GraphBuilder b(g);
  std::unordered_map<const Value*, std::vector<Value*>> contributions;
  contributions[loss].push_back(seed);
  // The sum of the contributions to v's gradient, typed like v.
  auto gradient_of = [&](const Value* v) -> Value* {
    auto it = contributions.find(v);
    if (it == contributions.end()) return nullptr;
    Value* sum = nullptr;
    for (Value* c : it->second) sum = sum ? b.add(sum, c) : c;
    if (sum->type().elem == v->dtype() && !sum->type().shape && v->type().shape) sum->set_type(v->type());
    it->second = {sum};
    return sum;
  };

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node* n = *it;
    if (non_differentiable_ops().count(n->op_type())) continue;
    GradContext ctx{b, *n, {}, {}};
    bool any_dy = false, any_wanted = false;
    for (Value* v : n->outputs()) {
      ctx.dy.push_back(v && on_path(v) ? gradient_of(v) : nullptr);
      any_dy = any_dy || ctx.dy.back();
    }
    for (Value* v : n->inputs()) {
      ctx.wanted.push_back(v && on_path(v));
      any_wanted = any_wanted || ctx.wanted.back();
    }
    if (!any_dy || !any_wanted) continue;
    auto rule = gradient_rules().find(n->qualified_op_type());
    if (rule == gradient_rules().end())
      ctx.fail(n->domain().empty() ? "no gradient rule for this op" : "no gradient rule for this op of domain '" + n->domain() + "'");
    std::vector<Value*> dx = rule->second(ctx);
    for (size_t i = 0; i < dx.size() && i < n->inputs().size(); ++i)
      if (dx[i] && ctx.wanted[i]) contributions[n->input(i)].push_back(dx[i]);
  }

  std::vector<Value*> out;
  std::unordered_set<const Value*> named;
  for (Value* w : wrt) {
    Value* grad = gradient_of(w);
    // A gradient produced here gets the conventional name, unless it is shared with another one.
    if (grad && grad->producer() && !named.count(grad) && grad != seed &&
        !forward_nodes.count(grad->producer())) {
      g.rename_value(grad, g.fresh_name(w->name() + "_grad"));
      named.insert(grad);
    }
    out.push_back(grad);
  }
  return out;
}

}  // namespace amp
