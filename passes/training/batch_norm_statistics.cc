#include "passes/training/batch_norm_statistics.h"

#include "passes/graph_builder.h"

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
      // A statistic that would become NaN or inf (a NaN in the batch) keeps its value, so the
      // saved model does not turn every sample's output into NaN: where (next - next) == 0.
      GraphBuilder b(g);
      Value* finite = b.equal(b.sub(next, next), b.scalar(0, next->dtype()));
      tg_.keep_state(stat);
      tg_.bind_update(stat, b.where(finite, next, stat), true);
      tg_.statistics.push_back(stat);
      count("statistics");
      changed = true;
    }
  }
  return changed;
}

}  // namespace amp
