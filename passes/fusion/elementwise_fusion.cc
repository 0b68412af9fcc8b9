#include "passes/fusion/elementwise_fusion.h"

#include <algorithm>
#include <unordered_set>

namespace amp {
namespace {

std::string node_summary(const std::vector<Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : "+") + n->op_type();
  return s;
}

}  // namespace

bool ElementwiseFusion::run(Model& m) {
  bool changed = run_on(*m.graph);
  for (TrainingInfo& t : m.training_info)
    if (t.algorithm) changed |= run_on(*t.algorithm);
  if (changed && m.opset_version(kAmpDomain) == 0) m.set_opset_version(kAmpDomain, 1);
  return changed;
}

bool ElementwiseFusion::run_on(Graph& g) {
  const std::vector<std::vector<Node*>> members = find_elementwise_group_nodes(g, min_nodes_);
  std::unordered_set<Value*> inlined;
  for (const std::vector<Node*>& nodes : members) {
    const FusionGroup group = make_fusion_group(nodes);
    Node* last = group.nodes.back();
    for (Node* n : group.nodes)
      for (Value* v : n->inputs())
        if (is_inlined_constant(v)) inlined.insert(v);

    std::vector<std::string> fresh(group.outputs.size());
    Node* fused = g.add_node(kFusedElementwiseOp, group.inputs, fresh, kAmpDomain, last);
    fused->name = g.fresh_name((group.nodes.front()->name.empty() ? "fused" : group.nodes.front()->name) + "_fused");
    fused->doc_string = node_summary(group.nodes);
    fused->set_attr(Attribute::of_string("program", group.program.to_text()));
    std::vector<std::string> names;
    for (size_t k = 0; k < group.outputs.size(); ++k) {
      Value* old = group.outputs[k];
      fused->output(k)->set_type(old->type());
      names.push_back(old->name());
      g.replace_all_uses(old, fused->output(k));
    }
    for (auto it = group.nodes.rbegin(); it != group.nodes.rend(); ++it) g.remove_node(*it);
    for (size_t k = 0; k < names.size(); ++k) g.rename_value(fused->output(k), names[k]);

    count("groups");
    count("nodes_fused", static_cast<int64_t>(group.nodes.size()));
    count("casts_absorbed", std::count_if(group.nodes.begin(), group.nodes.end(),
                                          [](const Node* n) { return n->op_type() == "Cast"; }));
  }
  for (Value* v : inlined) {
    if (!v->uses().empty() || v->is_output()) continue;
    g.remove_node(v->producer());
    count("constants_inlined");
  }
  if (!members.empty()) g.topological_sort();
  return !members.empty();
}

}  // namespace amp
