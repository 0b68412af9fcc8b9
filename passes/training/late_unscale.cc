#include "passes/training/late_unscale.h"

#include <unordered_map>
#include <vector>

namespace amp {

namespace {

bool is_16bit(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// A Cast of a 16-bit value to float32: exact, and twice the bytes of what it reads.
bool is_widening(const Node* n) {
  return n && n->domain().empty() && n->op_type() == "Cast" && n->inputs().size() == 1 && n->input(0) &&
         is_16bit(n->input(0)->dtype()) && n->output(0)->dtype() == DType::kFloat && n->subgraphs().empty();
}

// Mul(x, inverse) or Mul(inverse, x): the loss scale's unscaling.
bool is_unscaling(const Node* n, const Value* inverse) {
  if (!n || !inverse || !n->domain().empty() || n->op_type() != "Mul" || n->inputs().size() != 2) return false;
  return n->input(0) == inverse || n->input(1) == inverse;
}

}  // namespace

bool LateUnscalePass::run(Model& m) {
  Graph& g = *m.graph;
  // The nodes to move: per parameter, the unscaling Mul that made its gradient and the widening
  // Cast before it (either alone when the step has no loss scale or an fp32 backward pass).
  std::vector<Node*> chain;
  for (const TrainedParam& p : tg_.params) {
    Node* n = p.grad ? p.grad->producer() : nullptr;
    if (is_unscaling(n, tg_.inverse_scale)) {
      chain.push_back(n);
      const Value* x = n->input(0) == tg_.inverse_scale ? n->input(1) : n->input(0);
      n = x->uses().size() == 1 ? x->producer() : nullptr;
    }
    if (is_widening(n)) chain.push_back(n);
  }
  // Positions in the graph's order, once; a moved node takes the place just before its reader
  // (a Mul's Cast is then found before the Mul's new place). Moves keep the others' order.
  std::unordered_map<const Node*, double> at;
  double i = 0;
  for (Node* k : g.nodes()) at[k] = i++;
  int64_t moved = 0;
  for (Node* n : chain) {
    Node* first = nullptr;
    for (const Value* out : n->outputs())
      for (const Use& u : out->uses())
        if (at.count(u.node) && (!first || at[u.node] < at[first])) first = u.node;
    if (!first || at[first] <= at[n]) continue;  // read by nothing in this graph
    g.move_before(n, first);
    at[n] = at[first] - 1.0 / (2 + static_cast<double>(moved));  // just before `first`, after what was there
    ++moved;
  }
  count("nodes moved to their reader", moved);
  return moved > 0;
}

}  // namespace amp
