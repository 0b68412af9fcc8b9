#include "backends/cuda/loss_argmax_fusion.h"

#include <algorithm>

#include "backends/cuda/softmax_loss_ops.h"

namespace amp::cuda {
namespace {

bool one_node(const Unit& u, const std::vector<const Node*>& nodes, const char* op) {
  const Node* n = nodes[u.steps.front()];
  return n->domain().empty() && n->op_type() == op;
}

// An ArgMax over its input's last axis, as far as the graph says (a rank it does not know is
// checked per plan: the loss's scores are [N, C], and the ArgMax's rows must be those).
bool over_last_axis(const Node& argmax) {
  const int64_t axis = argmax.attr_int("axis", 0);
  if (axis == -1) return true;
  const Value* x = argmax.input(0);
  return x && x->type().shape && axis == static_cast<int64_t>(x->type().shape->rank()) - 1;
}

}  // namespace

std::vector<MergedUnit> loss_argmax_candidates(const Program& program, const std::vector<std::unique_ptr<Unit>>& units,
                                               const std::vector<const Node*>& nodes) {
  std::vector<MergedUnit> out;
  // Per value, the value a Reshape or Flatten made it from (-1).
  std::vector<int> reshaped_from(program.values.size(), -1);
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Program::Step& step = program.steps[s];
    if ((step.op == "Reshape" || step.op == "Flatten") && step.domain.empty() && !step.out.empty() && step.out[0] >= 0)
      reshaped_from[step.out[0]] = step.in.at(0);
  }
  auto related = [&](int a, int b) {
    return a >= 0 && b >= 0 && (a == b || reshaped_from[a] == b || reshaped_from[b] == a);
  };
  for (const auto& loss : units) {
    if (!one_node(*loss, nodes, "SoftmaxCrossEntropyLoss") || loss->in.empty()) continue;
    for (const auto& argmax : units) {
      if (argmax->steps.size() != 1 || !one_node(*argmax, nodes, "ArgMax") || argmax->in.empty() ||
          argmax->out.size() != 1 || !over_last_axis(*nodes[argmax->steps[0]]) || !related(loss->in[0], argmax->in[0]))
        continue;
      MergedUnit m;
      m.first = loss.get();
      m.second = argmax.get();
      m.unit = std::make_unique<Unit>();
      Unit& u = *m.unit;
      u.steps = loss->steps;
      u.steps.insert(u.steps.end(), argmax->steps.begin(), argmax->steps.end());
      u.in = loss->in;
      u.host_only = loss->host_only;
      u.out = loss->out;
      u.out.resize(2, -1);  // the loss, its log-probabilities (absent when not read)
      u.out.push_back(argmax->out[0]);
      u.where = loss->where;
      u.kind = loss->kind + "+ArgMax";
      u.op = make_cross_entropy_with_argmax(*nodes[loss->steps.front()], *nodes[argmax->steps[0]]);
      out.push_back(std::move(m));
      break;
    }
  }
  return out;
}

void merge_loss_argmax(const std::vector<MergedUnit>& candidates, ShapePlan& p) {
  for (const MergedUnit& m : candidates) {
    const auto at_loss = std::find(p.order.begin(), p.order.end(), m.first);
    const auto at_argmax = std::find(p.order.begin(), p.order.end(), m.second);
    if (at_loss == p.order.end() || at_argmax == p.order.end()) continue;
    const int scores = m.first->in[0], x = m.second->in[0];
    if (p.root(scores) != p.root(x)) continue;
    const TensorDesc& s = p.desc[scores];
    const TensorDesc& a = p.desc[x];
    if (s.dims.size() != 2 || a.dims.empty() || s.dtype != a.dtype || a.dims.back() != s.dims[1] ||
        a.numel() != s.numel() || s.channels_last || a.channels_last || s.packed_bytes || a.packed_bytes)
      continue;
    // Where the earlier of the two ran; whatever the later one reads must be written by then.
    const size_t first = static_cast<size_t>(std::min(at_loss, at_argmax) - p.order.begin());
    const size_t second = static_cast<size_t>(std::max(at_loss, at_argmax) - p.order.begin());
    const Unit* later = p.order[second];
    bool ready = true;
    for (size_t k = first; k < second && ready; ++k)
      for (int o : p.order[k]->out)
        for (int i : later->in)
          if (o >= 0 && i >= 0 && p.root(o) == p.root(i)) ready = false;
    if (!ready) continue;
    p.order[first] = m.unit.get();
    p.order.erase(p.order.begin() + static_cast<std::ptrdiff_t>(second));
  }
}

}  // namespace amp::cuda
