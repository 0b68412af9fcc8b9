#include "passes/training/all_reduce_gradients.h"

#include <algorithm>
#include <unordered_map>

#include "graph/amp_ops.h"
#include "passes/graph_builder.h"

namespace amp {

namespace {

// The unscaling Mul(scaled_grad, inverse_scale) that made p.grad, when p.grad is still its result.
Node* unscaling_mul(const TrainedParam& p, const Value* inverse) {
  if (!p.scaled_grad || !inverse || !p.grad) return nullptr;
  Node* mul = p.grad->producer();
  if (!mul || mul->op_type() != "Mul" || mul->inputs().size() != 2) return nullptr;
  const bool match = (mul->input(0) == p.scaled_grad && mul->input(1) == inverse) ||
                     (mul->input(1) == p.scaled_grad && mul->input(0) == inverse);
  return match ? mul : nullptr;
}

// The node after n in g's order (null at the end).
Node* next_node(Graph& g, const Node* n) {
  bool found = false;
  for (Node* m : g.nodes()) {
    if (found) return m;
    found = m == n;
  }
  return nullptr;
}

// A gradient widened to fp32 by a Cast: autodiff emits the Casts of the master weights' gradients
// last (their forward Casts come first), after the whole backward pass. Moved right after what
// they widen, they and the buckets reading them follow each gradient as it is made.
void hoist_widening(Graph& g, Value* v) {
  Node* cast = v->producer();
  if (!cast || cast->op_type() != "Cast" || !cast->domain().empty() || cast->inputs().size() != 1 || !cast->input(0))
    return;
  const Node* made = cast->input(0)->producer();
  if (made) g.move_before(cast, next_node(g, made));
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// One AllReduce over `values` (reduce: the gate, or null), placed right after the last node that
// produces one of them; returns the averages in order.
std::vector<Value*> all_reduce(Graph& g, Value* reduce, const std::vector<Value*>& values) {
  std::vector<Value*> inputs{reduce};
  std::vector<ValueType> types;
  for (Value* v : values) {
    inputs.push_back(v);
    types.push_back(v->type());
  }
  std::vector<Value*> outs = GraphBuilder(g).emit("AllReduce", inputs, types, {}, kAmpDomain);
  Node* node = outs[0]->producer();
  // Right after the latest producer: where every input exists, as early as possible.
  Node* after = nullptr;
  for (Node* n : g.nodes()) {
    if (n == node) break;
    for (const Value* out : n->outputs())
      if (out && std::find(inputs.begin(), inputs.end(), out) != inputs.end()) after = n;
  }
  if (after) {
    Node* next = next_node(g, after);
    if (next != node) g.move_before(node, next);
  } else {
    g.move_before(node, *g.nodes().begin());
  }
  return outs;
}

}  // namespace

bool AllReduceGradientsPass::run(Model& m) {
  if (!spec_.enabled || tg_.params.empty()) return false;
  Graph& g = *m.graph;

  // What each parameter's bucket reduces, and when the backward pass has it ready.
  struct Item {
    TrainedParam* param;
    Value* value;
    Node* unscale;  // the unscaling Mul to read the average instead, or null
    size_t ready;
    int64_t bytes;
  };
  std::vector<Item> items;
  for (TrainedParam& p : tg_.params) {
    // With accumulation the reduced value is the accumulated gradient (only the last micro-batch
    // of a step reduces); without, the gradient before unscaling, when the loss is scaled.
    Node* unscale = tg_.apply ? nullptr : unscaling_mul(p, tg_.inverse_scale);
    Value* v = unscale ? p.scaled_grad : p.grad;
    hoist_widening(g, v);
    items.push_back({&p, v, unscale, 0, numel(p.value->initializer().dims) * static_cast<int64_t>(dtype_size(v->dtype()))});
  }
  std::unordered_map<const Node*, size_t> position;
  for (Node* n : g.nodes()) position.emplace(n, position.size());
  for (Item& it : items) it.ready = it.value->producer() ? position.at(it.value->producer()) : 0;
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.ready < b.ready; });

  size_t first = 0;
  while (first < items.size()) {
    size_t end = first + 1;
    int64_t bytes = items[first].bytes;
    while (end < items.size() && bytes + items[end].bytes <= spec_.bucket_bytes) bytes += items[end++].bytes;
    std::vector<Value*> values;
    for (size_t i = first; i < end; ++i) values.push_back(items[i].value);
    const std::vector<Value*> means = all_reduce(g, tg_.apply, values);
    for (size_t i = first; i < end; ++i) {
      Item& it = items[i];
      Value* mean = means[i - first];
      mean->set_type(ValueType::tensor(it.value->dtype(), Shape::of(it.param->value->initializer().dims)));
      g.rename_value(mean, g.fresh_name(it.param->value->name() + "_grad_mean"));
      if (it.unscale) {
        for (size_t k = 0; k < it.unscale->inputs().size(); ++k)
          if (it.unscale->input(k) == it.value) it.unscale->set_input(k, mean);
        it.param->scaled_grad = mean;
      } else {
        it.param->grad = mean;
      }
    }
    count("buckets");
    first = end;
  }
  count("gradients averaged", static_cast<int64_t>(items.size()));

  // BatchNorm statistics: one bucket, after the last BatchNorm.
  if (!tg_.statistics.empty()) {
    std::vector<Value*> locals;
    for (Value* stat : tg_.statistics) {
      const auto& ups = tg_.updates();
      auto u = std::find_if(ups.begin(), ups.end(), [&](const auto& p) { return p.first == stat->name(); });
      locals.push_back(g.value(u->second));
    }
    const std::vector<Value*> means = all_reduce(g, tg_.apply, locals);
    for (size_t i = 0; i < means.size(); ++i) {
      means[i]->set_type(tg_.statistics[i]->type());
      tg_.rebind_update(tg_.statistics[i], means[i], "this_rank");
    }
    count("statistics averaged", static_cast<int64_t>(means.size()));
  }
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  return true;
}

}  // namespace amp
