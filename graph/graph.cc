#include "graph/graph.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_set>

#include "graph/error.h"

namespace amp {

const std::string Graph::kAbsent(1, '\0');

Graph::Graph(Graph* parent)
    : parent_(parent), all_names_(parent ? parent->all_names_ : std::make_shared<std::unordered_set<std::string>>()) {}

Graph::~Graph() {
  // Nodes may read values of enclosing graphs, which outlive this one: drop those uses first.
  for (auto& n : nodes_) n->truncate_inputs(0);
  for (Value* v : outputs_) --v->output_refs_;
}

Value* Graph::value(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? nullptr : it->second.get();
}

Value* Graph::lookup(std::string_view name) const {
  for (const Graph* g = this; g; g = g->parent_)
    if (Value* v = g->value(name)) return v;
  return nullptr;
}

void Graph::register_name(const std::string& name) { all_names_->insert(name); }

Value* Graph::create_value(const std::string& name, ValueType type) {
  if (name.empty()) throw Error("graph '" + this->name + "': a value needs a name");
  if (lookup(name)) throw Error("graph '" + this->name + "': value name '" + name + "' is already defined");
  auto v = std::unique_ptr<Value>(new Value(this, name, std::move(type)));
  Value* raw = v.get();
  values_.emplace(name, std::move(v));
  register_name(name);
  return raw;
}

std::string Graph::fresh_name(std::string_view base) {
  std::string b(base.empty() ? "v" : base);
  if (!all_names_->count(b) && !lookup(b)) {
    register_name(b);
    return b;
  }
  for (size_t k = 1;; ++k) {
    std::string cand = b + "_" + std::to_string(k);
    if (!all_names_->count(cand) && !lookup(cand)) {
      register_name(cand);
      return cand;
    }
  }
}

void Graph::rename_value(Value* v, const std::string& name) {
  if (v->name_ == name) return;
  if (v->graph_ != this) throw Error("rename_value: '" + v->name_ + "' belongs to another graph");
  if (lookup(name)) throw Error("graph '" + this->name + "': value name '" + name + "' is already defined");
  auto it = values_.find(v->name_);
  auto owned = std::move(it->second);
  values_.erase(it);
  owned->name_ = name;
  values_.emplace(name, std::move(owned));
  register_name(name);
}

void Graph::erase_value(Value* v) {
  if (v->producer_ || !v->uses_.empty() || v->is_input_ || v->output_refs_ > 0 || v->initializer_ || v->sparse_)
    throw Error("internal: erase_value('" + v->name_ + "') while it is still in use");
  value_info_.erase(std::remove(value_info_.begin(), value_info_.end(), v), value_info_.end());
  values_.erase(v->name_);
}

static bool orphan(const Value* v) {
  return !v->producer() && v->uses().empty() && !v->is_input() && !v->is_output() && !v->has_initializer() &&
         !v->sparse_initializer();
}

Value* Graph::add_input(const std::string& name, ValueType type) {
  Value* v = create_value(name, std::move(type));
  mark_input(v);
  return v;
}

void Graph::mark_input(Value* v) {
  if (v->is_input_) return;
  v->is_input_ = true;
  inputs_.push_back(v);
}

void Graph::remove_input(Value* v) {
  inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), v), inputs_.end());
  v->is_input_ = false;
  if (orphan(v)) erase_value(v);
}

void Graph::add_output(Value* v) {
  outputs_.push_back(v);
  ++v->output_refs_;
}

void Graph::set_output(size_t i, Value* v) {
  --outputs_.at(i)->output_refs_;
  outputs_[i] = v;
  ++v->output_refs_;
}

void Graph::remove_output(size_t i) {
  --outputs_.at(i)->output_refs_;
  outputs_.erase(outputs_.begin() + static_cast<std::ptrdiff_t>(i));
}

Value* Graph::add_initializer(Tensor t) {
  Value* v = value(t.name);
  if (!v) v = create_value(t.name);
  set_initializer(v, std::move(t));
  return v;
}

void Graph::set_initializer(Value* v, Tensor t) {
  if (!v->initializer_) initializers_.push_back(v);
  if (!v->type_.known() || v->type_.elem != t.dtype) v->type_ = ValueType::tensor(t.dtype, Shape::of(t.dims));
  t.name = v->name_;
  v->initializer_ = std::move(t);
}

void Graph::remove_initializer(Value* v) {
  initializers_.erase(std::remove(initializers_.begin(), initializers_.end(), v), initializers_.end());
  v->initializer_.reset();
  if (orphan(v)) erase_value(v);
}

Value* Graph::add_sparse_initializer(const std::string& name, SparseTensor t) {
  Value* v = value(name);
  if (!v) v = create_value(name);
  ValueType type;
  type.kind = ValueType::Kind::kSparseTensor;
  type.elem = t.values.dtype;
  type.shape = Shape::of(t.dims);
  if (!v->type_.known()) v->type_ = type;
  v->sparse_ = std::move(t);
  sparse_initializers_.push_back(v);
  return v;
}

std::vector<Node*> Graph::node_vector() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Node* Graph::insert_node(std::unique_ptr<Node> n, Node* before) {
  auto where = before ? before->pos_ : nodes_.end();
  if (before && before->graph_ != this) throw Error("internal: insert position is in another graph");
  n->serial_ = next_serial_++;
  auto it = nodes_.insert(where, std::move(n));
  (*it)->pos_ = it;
  return it->get();
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<std::string>& output_names, const std::string& domain, Node* before) {
  Node* n = insert_node(std::unique_ptr<Node>(new Node(this, op_type, domain)), before);
  for (size_t i = 0; i < inputs.size(); ++i) n->set_input(i, inputs[i]);
  for (const auto& name : output_names) {
    if (name == kAbsent) {
      n->outputs_.push_back(nullptr);
      continue;
    }
    add_node_output(n, name.empty() ? fresh_name(op_type + "_out") : name);
  }
  return n;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                      Node* before) {
  return add_node(op_type, inputs, std::vector<std::string>(num_outputs), "", before);
}

Value* Graph::add_node_output(Node* n, const std::string& name) {
  Value* v = create_value(name);
  v->producer_ = n;
  v->output_index_ = n->outputs_.size();
  n->outputs_.push_back(v);
  return v;
}

void Graph::move_before(Node* n, Node* pos) {
  if (n == pos) return;
  nodes_.splice(pos ? pos->pos_ : nodes_.end(), nodes_, n->pos_);
}

void Graph::remove_node(Node* n) {
  if (n->graph_ != this) throw Error("internal: remove_node of a node of another graph");
  for (Value* v : n->outputs_)
    if (v && (!v->uses_.empty() || v->output_refs_ > 0))
      throw Error("internal: removing " + n->label() + " whose output '" + v->name_ + "' is still read");
  n->truncate_inputs(0);
  for (Value* v : n->outputs_) {
    if (!v) continue;
    v->producer_ = nullptr;
    erase_value(v);
  }
  nodes_.erase(n->pos_);
}

static void for_each_graph(Graph* g, const std::function<void(Graph*)>& fn) {
  fn(g);
  for (Node* n : g->nodes())
    for (Graph* sub : n->subgraphs()) for_each_graph(sub, fn);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.node->set_input(u.index, to);
  for_each_graph(this, [&](Graph* g) {
    for (size_t i = 0; i < g->outputs_.size(); ++i)
      if (g->outputs_[i] == from) g->set_output(i, to);
  });
}

static bool encloses(const Graph* outer, const Graph* g) {
  for (; g; g = g->parent())
    if (g == outer) return true;
  return false;
}

std::vector<Value*> Graph::all_reads(const Node* n) {
  std::vector<Value*> out;
  for (Value* v : n->inputs())
    if (v) out.push_back(v);
  for (Graph* sub : n->subgraphs()) {
    for_each_graph(sub, [&](Graph* g) {
      auto take = [&](Value* v) {
        if (v && !encloses(sub, v->graph())) out.push_back(v);
      };
      for (Node* m : g->nodes())
        for (Value* v : m->inputs()) take(v);
      for (Value* v : g->outputs()) take(v);
    });
  }
  return out;
}

void Graph::topological_sort() {
  std::vector<Node*> order = node_vector();
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;
  std::vector<size_t> indegree(order.size(), 0);
  std::vector<std::vector<size_t>> successors(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    std::unordered_set<size_t> deps;
    for (Value* v : all_reads(order[i]))
      if (v->producer_ && v->producer_->graph_ == this) deps.insert(index.at(v->producer_));
    for (size_t d : deps) successors[d].push_back(i);
    indegree[i] = deps.size();
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < order.size(); ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<Node*> sorted;
  sorted.reserve(order.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    sorted.push_back(order[i]);
    for (size_t s : successors[i])
      if (--indegree[s] == 0) ready.push(s);
  }
  if (sorted.size() != order.size()) {
    for (size_t i = 0; i < order.size(); ++i)
      if (indegree[i] > 0) throw InputError("graph '" + name + "' has a cycle through node " + order[i]->label());
  }
  for (Node* n : sorted) nodes_.splice(nodes_.end(), nodes_, n->pos_);
}

bool Graph::is_topologically_sorted() const {
  std::unordered_set<const Node*> seen;
  for (Node* n : nodes()) {
    for (Value* v : all_reads(n))
      if (v->producer_ && v->producer_->graph_ == this && !seen.count(v->producer_)) return false;
    seen.insert(n);
  }
  return true;
}

void Value::set_dtype(DType t) {
  if (type_.kind == ValueType::Kind::kUnknown) type_.kind = ValueType::Kind::kTensor;
  type_.elem = t;
}

}  // namespace amp
