#include "passes/training/training_graph.h"

#include <algorithm>

#include "graph/error.h"
#include "passes/graph_builder.h"

namespace amp {

Value* TrainingGraph::add_state(const std::string& base, Tensor init) {
  init.name = graph().fresh_name(base);
  Value* v = graph().add_initializer(std::move(init));
  keep_state(v);
  return v;
}

void TrainingGraph::keep_state(Value* v) {
  if (std::find(state_.begin(), state_.end(), v->name()) == state_.end()) state_.push_back(v->name());
}

void TrainingGraph::bind_update(Value* state, Value* next, bool keep_name) {
  // Graph outputs need full types (onnx::checker), and the next value has the state's.
  if (next->dtype() == state->dtype() && !next->type().shape) next->set_type(state->type());
  if (!next->is_output()) {
    if (!keep_name && next->producer()) graph().rename_value(next, graph().fresh_name(state->name() + "_next"));
    graph().add_output(next);
  }
  updates_.emplace_back(state->name(), next->name());
}

void TrainingGraph::rebind_update(Value* state, Value* next, const std::string& role) {
  auto it = std::find_if(updates_.begin(), updates_.end(), [&](const auto& u) { return u.first == state->name(); });
  if (it == updates_.end()) throw Error("internal: rebinding '" + state->name() + "', which has no update");
  Graph& g = graph();
  Value* before = g.value(it->second);
  const auto& outs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i] == before) {
      g.remove_output(i);
      break;
    }
  g.rename_value(before, g.fresh_name(state->name() + "_" + role));
  updates_.erase(it);
  bind_update(state, next);
}

Value* TrainingGraph::update_allowed() {
  if (allowed_) return allowed_;
  GraphBuilder b(graph());
  if (all_finite && apply)
    allowed_ = b.logical_and(all_finite, apply);
  else
    allowed_ = all_finite ? all_finite : apply;
  return allowed_;
}

}  // namespace amp
