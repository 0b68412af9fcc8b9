#include "passes/training/batch_norm_statistics.h"

namespace amp {

bool BatchNormStatisticsPass::run(Model& m) {
  Graph& g = *m.graph;
  bool changed = false;
  for (Node* n : g.node_vector()) {
    if (n->op_type() != "BatchNormalization" || !n->domain().empty() || n->attr_int("training_mode", 0) == 0) continue;
    for (size_t i = 1; i < 3; ++i) {
      Value* stat = n->input(2 + i);
      if (!stat || !stat->has_initializer()) continue;
      Value* next = n->output(i);
      if (!next) {
        if (n->outputs().size() != i) continue;  // an absent slot in the middle: leave the node as it is
        next = g.add_node_output(n, g.fresh_name(stat->name() + "_next"));
        next->set_type(stat->type());
      }
      tg_.keep_state(stat);
      tg_.bind_update(stat, next, true);
      tg_.statistics.push_back(stat);
      count("statistics");
      changed = true;
    }
  }
  return changed;
}

}  // namespace amp
