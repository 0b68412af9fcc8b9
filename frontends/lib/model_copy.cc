#include "frontends/lib/model_copy.h"

#include "passes/training/eval_mode.h"

namespace amp {

Model copy_model(const Model& m) {
  const Graph& g = *m.graph;
  bool nested = !m.training_info.empty();
  for (const Node* n : g.nodes()) nested = nested || !n->subgraphs().empty();
  if (nested) return clone_model(m);

  Model c;
  c.ir_version = m.ir_version;
  c.opset_imports = m.opset_imports;
  c.producer_name = m.producer_name;
  c.producer_version = m.producer_version;
  c.domain = m.domain;
  c.doc_string = m.doc_string;
  c.model_version = m.model_version;
  c.metadata_props = m.metadata_props;
  c.functions = m.functions;
  c.path = m.path;
  Graph& h = *c.graph;
  h.name = g.name;
  h.doc_string = g.doc_string;
  auto same = [&](const Value* v) { return v ? h.value(v->name()) : nullptr; };
  auto describe = [](Value* to, const Value* from) {
    to->set_type(from->type());
    to->doc_string = from->doc_string;
  };
  for (const Value* v : g.initializers()) describe(h.add_initializer(v->initializer()), v);
  for (const Value* v : g.sparse_initializers()) describe(h.add_sparse_initializer(v->name(), *v->sparse_initializer()), v);
  for (const Value* v : g.inputs()) {
    if (Value* known = same(v))
      h.mark_input(known);
    else
      describe(h.add_input(v->name(), v->type()), v);
  }
  // Outputs first, inputs once every value exists: a graph need not be in topological order.
  std::vector<std::pair<const Node*, Node*>> pairs;
  for (const Node* n : g.nodes()) {
    std::vector<std::string> names;
    for (const Value* v : n->outputs()) names.push_back(v ? v->name() : Graph::kAbsent);
    Node* d = h.add_node(n->op_type(), {}, names, n->domain());
    d->name = n->name;
    d->doc_string = n->doc_string;
    for (const Attribute& a : n->attributes()) d->set_attr(a.copy_without_graphs());
    for (size_t k = 0; k < n->outputs().size(); ++k)
      if (n->output(k)) describe(d->output(k), n->output(k));
    pairs.emplace_back(n, d);
  }
  for (const auto& [n, d] : pairs)
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->input(i);
      Value* mapped = same(v);
      if (v && !mapped) mapped = h.create_value(v->name(), v->type());  // read, defined nowhere
      d->set_input(i, mapped);
    }
  for (const Value* v : g.outputs()) {
    Value* mapped = same(v);
    if (!mapped) mapped = h.create_value(v->name(), v->type());
    h.add_output(mapped);
  }
  for (const Value* v : g.value_info())
    if (Value* mapped = same(v)) h.value_info().push_back(mapped);
  return c;
}

}  // namespace amp
