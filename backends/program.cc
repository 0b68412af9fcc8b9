#include "backends/program.h"

#include <queue>

#include "graph/error.h"
#include "graph/subgraph_model.h"

namespace amp {

int Program::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

Program make_program(const Model& m, std::vector<const Node*>* nodes) {
  Program p;
  p.path = m.path.empty() ? "<model>" : m.path;
  const Graph& g = *m.graph;
  auto number = [&](const Value* v) -> int {
    auto [it, fresh] = p.index_.emplace(v->name(), static_cast<int>(p.values.size()));
    if (fresh) {
      Program::Val val;
      val.name = v->name();
      if (v->type().is_tensor()) {
        val.dtype = v->dtype();
        val.shape = v->type().shape;
      }
      p.values.push_back(std::move(val));
    }
    return it->second;
  };
  for (const Value* v : g.initializers()) {
    const int id = number(v);
    p.values[id].initializer = static_cast<int>(p.initializers.size());
    p.initializers.push_back(v->initializer());
  }
  for (const Value* v : g.inputs()) {
    const int id = number(v);
    p.values[id].graph_input = true;
    p.inputs.push_back(id);
  }

  // Kahn's algorithm keeping file order among ready nodes: the model's own order when it is sorted.
  std::vector<const Node*> order;
  for (const Node* n : g.nodes()) order.push_back(n);
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  std::vector<size_t> pending(order.size(), 0);
  std::vector<std::vector<size_t>> readers(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    for (const Value* v : Graph::all_reads(order[i])) {
      if (v->producer() && v->producer()->graph() == &g) {
        ++pending[i];
        readers[pos.at(v->producer())].push_back(i);
      }
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < order.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<const Node*> sorted;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    sorted.push_back(order[i]);
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.push(r);
  }
  if (sorted.size() != order.size()) {
    for (size_t i = 0; i < order.size(); ++i)
      if (pending[i] > 0) throw InputError(p.path + ": node " + order[i]->label() + " is on a cycle");
  }

  for (const Node* n : sorted) {
    Program::Step s;
    s.op = n->op_type();
    s.domain = n->domain();
    s.opset = m.opset_version(n->domain());
    s.where = p.path + ": node " + n->label();
    for (const Value* v : n->inputs()) s.in.push_back(v ? number(v) : -1);
    // What its subgraphs read from this graph (or one around it) follows its own inputs.
    for (const Value* v : enclosing_reads(*n)) s.in.push_back(number(v));
    for (const Value* v : n->outputs()) {
      if (!v) {
        s.out.push_back(-1);
        continue;
      }
      const int id = number(v);
      p.values[id].producer = static_cast<int>(p.steps.size());
      s.out.push_back(id);
    }
    p.steps.push_back(std::move(s));
  }
  for (const Value* v : g.outputs()) p.outputs.push_back(number(v));
  if (nodes) *nodes = std::move(sorted);
  return p;
}

std::vector<size_t> ordered_topological_sort(const std::vector<std::vector<size_t>>& deps, const std::vector<size_t>& key) {
  const size_t n = deps.size();
  std::vector<std::vector<size_t>> readers(n);
  std::vector<size_t> pending(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = deps[i].size();
    for (size_t d : deps[i]) readers[d].push_back(i);
  }
  auto later = [&](size_t a, size_t b) { return key[a] > key[b]; };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> ready(later);
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.push(r);
  }
  return order;
}

std::vector<int> steps_needed(const Program& p, const std::vector<int>& targets) {
  std::vector<bool> need_value(p.values.size(), false), need_step(p.steps.size(), false);
  std::vector<int> stack(targets.begin(), targets.end());
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || need_value[v]) continue;
    need_value[v] = true;
    const int s = p.values[v].producer;
    if (s < 0 || need_step[s]) continue;
    need_step[s] = true;
    for (int in : p.steps[s].in) stack.push_back(in);
  }
  std::vector<int> out;
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (need_step[s]) out.push_back(static_cast<int>(s));
  return out;
}

std::vector<bool> shape_values(const Program& p, const std::vector<std::vector<int>>& shape_inputs,
                               const std::vector<bool>& reads_data) {
  std::vector<bool> known(p.values.size(), false);
  std::vector<int> stack;
  for (size_t s = 0; s < p.steps.size(); ++s)
    for (int i : shape_inputs[s])
      if (i < static_cast<int>(p.steps[s].in.size())) stack.push_back(p.steps[s].in[i]);
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || known[v]) continue;
    known[v] = true;
    const int s = p.values[v].producer;
    if (s >= 0 && reads_data[s])
      for (int in : p.steps[s].in) stack.push_back(in);
  }
  return known;
}

std::string type_str(DType t, const std::vector<int64_t>& dims) {
  std::string s = std::string(dtype_name(t)) + "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::vector<const Tensor*> bind_feeds(const Program& p, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                      const char* backend) {
  std::vector<const Tensor*> fed(p.values.size(), nullptr);
  for (const auto& [name, t] : feeds) {
    const int v = p.find(name);
    if (v < 0 || !p.values[v].graph_input) throw InputError(p.path + ": '" + name + "' is not an input of the graph");
    const Program::Val& val = p.values[v];
    bool ok = val.dtype == DType::kUndefined || val.dtype == t.dtype;
    if (ok && val.shape) {
      ok = val.shape->rank() == t.dims.size();
      for (size_t i = 0; ok && i < t.dims.size(); ++i)
        ok = !val.shape->dims[i].is_static() || *val.shape->dims[i].value == t.dims[i];
    }
    if (!ok)
      throw InputError(p.path + ": input '" + name + "' expects " +
                       (val.dtype == DType::kUndefined ? std::string("tensor") : std::string(dtype_name(val.dtype))) +
                       (val.shape ? val.shape->str() : std::string()) + ", got " + type_str(t.dtype, t.dims));
    if (t.dtype == DType::kString || dtype_size(t.dtype) == 0)
      throw InputError(p.path + ": input '" + name + "': element type " + std::string(dtype_name(t.dtype)) +
                       " is not supported by the " + backend + " backend");
    fed[v] = &t;
  }
  return fed;
}

std::vector<int> fetch_values(const Program& p, const std::vector<std::string>& fetches) {
  std::vector<int> ids;
  for (const std::string& name : fetches) {
    const int v = p.find(name);
    if (v < 0) throw InputError(p.path + ": no value named '" + name + "' to fetch");
    ids.push_back(v);
  }
  return ids;
}

std::string plan_signature(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches,
                           const std::vector<bool>& shape_value) {
  std::string key;
  for (int f : fetches) key += std::to_string(f) + ",";
  for (size_t v = 0; v < fed.size(); ++v) {
    if (!fed[v]) continue;
    key += "|" + std::to_string(v) + ":" + type_str(fed[v]->dtype, fed[v]->dims);
    // Shapes depend on these contents, so they are part of what a plan is valid for.
    if (shape_value[v]) key.append(reinterpret_cast<const char*>(fed[v]->data()), fed[v]->nbytes());
  }
  return key;
}

}  // namespace amp
