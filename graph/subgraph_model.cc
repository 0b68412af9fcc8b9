#include "graph/subgraph_model.h"

#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"

namespace amp {

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

void copy_graph(const Graph& from, Graph& to, ValueMap& map);

Attribute copy_attribute(const Attribute& a, Graph& owner, ValueMap& map) {
  Attribute c = a.copy_without_graphs();
  auto copy_sub = [&](const Graph& g) {
    auto sub = std::make_unique<Graph>(&owner);
    sub->name = g.name;
    copy_graph(g, *sub, map);
    return sub;
  };
  if (a.g) c.g = copy_sub(*a.g);
  for (const auto& g : a.graphs) c.graphs.push_back(copy_sub(*g));
  return c;
}

// from's initializers, nodes and outputs into `to`, whose inputs exist; map takes each value of
// from (and of its nested subgraphs) to its copy, and holds the values read from around it.
void copy_body(const Graph& from, Graph& to, ValueMap& map) {
  for (const Value* v : from.initializers()) {
    Tensor t = v->initializer();
    t.name = v->name();
    if (auto it = map.find(v); it != map.end()) to.set_initializer(it->second, std::move(t));
    else map[v] = to.add_initializer(std::move(t));
  }
  auto resolve = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    if (it == map.end())
      throw InputError("subgraph '" + from.name + "' reads '" + v->name() + "', which no graph around it defines");
    return it->second;
  };
  for (const Node* n : from.nodes()) {
    std::vector<Value*> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(resolve(v));
    std::vector<std::string> names;
    for (const Value* v : n->outputs()) names.push_back(v ? v->name() : Graph::kAbsent);
    Node* copy = to.add_node(n->op_type(), inputs, names, n->domain());
    copy->name = n->name;
    copy->doc_string = n->doc_string;
    for (size_t k = 0; k < n->outputs().size(); ++k)
      if (const Value* v = n->outputs()[k]) {
        copy->outputs()[k]->set_type(v->type());
        map[v] = copy->outputs()[k];
      }
    for (const Attribute& a : n->attributes()) copy->set_attr(copy_attribute(a, to, map));
  }
  for (const Value* v : from.outputs()) to.add_output(resolve(v));
}

void copy_graph(const Graph& from, Graph& to, ValueMap& map) {
  for (const Value* v : from.inputs()) map[v] = to.add_input(v->name(), v->type());
  copy_body(from, to, map);
}

}  // namespace

std::vector<Value*> enclosing_reads(const Node& n) {
  // all_reads lists n's present inputs first, then what its subgraphs read from outside them.
  const std::vector<Value*> reads = Graph::all_reads(&n);
  size_t own = 0;
  for (const Value* v : n.inputs()) own += v != nullptr;
  std::vector<Value*> out;
  std::unordered_set<const Value*> seen;
  for (size_t i = own; i < reads.size(); ++i)
    if (seen.insert(reads[i]).second) out.push_back(reads[i]);
  return out;
}

Model subgraph_model(const Graph& body, const std::vector<Value*>& outer, const std::vector<OpsetImport>& opsets) {
  Model m;
  m.opset_imports = opsets;
  Graph& g = *m.graph;
  g.name = body.name;
  ValueMap map;
  for (const Value* v : body.inputs()) map[v] = g.add_input(v->name(), v->type());
  for (const Value* v : outer) map[v] = g.add_input(v->name(), v->type());
  copy_body(body, g, map);
  return m;
}

}  // namespace amp
