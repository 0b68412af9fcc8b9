#include "passes/name_nodes.h"

#include <functional>
#include <unordered_set>

namespace amp {

namespace {

void for_each_node(Graph& g, const std::function<void(Node&)>& fn) {
  for (Node* n : g.nodes()) {
    fn(*n);
    for (Graph* sub : n->subgraphs()) for_each_node(*sub, fn);
  }
}

}  // namespace

bool NameNodesPass::run(Model& m) {
  stats_.clear();
  std::unordered_set<std::string> taken;
  for_each_node(*m.graph, [&](Node& n) {
    if (!n.name.empty()) taken.insert(n.name);
  });
  size_t position = 0;
  for_each_node(*m.graph, [&](Node& n) {
    ++position;
    if (!n.name.empty()) return;
    const Value* out = n.outputs().empty() ? nullptr : n.output(0);
    const std::string base = n.op_type() + "_" + (out ? out->name() : std::to_string(position));
    std::string name = base;
    for (int k = 1; taken.count(name); ++k) name = base + "_" + std::to_string(k);
    taken.insert(name);
    n.name = name;
    count("nodes named");
  });
  return stats_.count("nodes named") > 0;
}

}  // namespace amp
