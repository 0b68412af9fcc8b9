#include "passes/fusion/replace_chain.h"

#include <algorithm>
#include <string>

#include "passes/fusion/chain_pattern.h"

namespace amp {

void replace_chain(Graph& g, const std::vector<Node*>& chain, Node* replacement, const Value* x,
                   std::unordered_set<Node*>& removed) {
  Value* y = chain.back()->output(0);
  const std::string name = y->name();
  const bool listed = std::find(g.value_info().begin(), g.value_info().end(), y) != g.value_info().end();
  replacement->output(0)->set_type(y->type().shape ? y->type() : x->type());
  g.replace_all_uses(y, replacement->output(0));
  // Readers first; then the constants nothing reads any more.
  std::vector<Node*> constants;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const Value* v : (*it)->inputs())
      if (v && is_op(v->producer(), "Constant"))
        constants.push_back(v->producer());
    g.remove_node(*it);
    removed.insert(*it);
  }
  for (Node* c : constants)
    if (!removed.count(c) && c->output(0)->uses().empty() && !c->output(0)->is_output()) {
      g.remove_node(c);
      removed.insert(c);
    }
  g.rename_value(replacement->output(0), name);
  if (listed) g.value_info().push_back(replacement->output(0));
}

}  // namespace amp
