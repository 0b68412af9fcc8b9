#include "graph/node.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/graph.h"

namespace amp {

void Node::set_input(size_t i, Value* v) {
  if (i >= inputs_.size()) inputs_.resize(i + 1, nullptr);
  if (Value* old = inputs_[i]) {
    auto& uses = old->uses_;
    auto it = std::find(uses.begin(), uses.end(), Use{this, i});
    if (it == uses.end()) throw Error("internal: use list of '" + old->name() + "' lost a use by " + label());
    *it = uses.back();
    uses.pop_back();
  }
  inputs_[i] = v;
  if (v) v->uses_.push_back(Use{this, i});
}

void Node::truncate_inputs(size_t n) {
  while (inputs_.size() > n) {
    set_input(inputs_.size() - 1, nullptr);
    inputs_.pop_back();
  }
}

const Attribute* Node::attr(std::string_view name) const {
  for (const auto& a : attrs_)
    if (a.name == name) return &a;
  return nullptr;
}

Attribute* Node::mutable_attr(std::string_view name) {
  for (auto& a : attrs_)
    if (a.name == name) return &a;
  return nullptr;
}

void Node::set_attr(Attribute a) {
  if (Attribute* old = mutable_attr(a.name))
    *old = std::move(a);
  else
    attrs_.push_back(std::move(a));
}

bool Node::remove_attr(std::string_view name) {
  auto it = std::find_if(attrs_.begin(), attrs_.end(), [&](const Attribute& a) { return a.name == name; });
  if (it == attrs_.end()) return false;
  attrs_.erase(it);
  return true;
}

int64_t Node::attr_int(std::string_view name, int64_t fallback) const {
  const Attribute* a = attr(name);
  return a && a->kind == AttrKind::kInt ? a->i : fallback;
}

float Node::attr_float(std::string_view name, float fallback) const {
  const Attribute* a = attr(name);
  return a && a->kind == AttrKind::kFloat ? a->f : fallback;
}

std::string Node::attr_string(std::string_view name, std::string fallback) const {
  const Attribute* a = attr(name);
  return a && a->kind == AttrKind::kString ? a->s : fallback;
}

std::vector<int64_t> Node::attr_ints(std::string_view name, std::vector<int64_t> fallback) const {
  const Attribute* a = attr(name);
  return a && a->kind == AttrKind::kInts ? a->ints : fallback;
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& a : attrs_) {
    if (a.g) out.push_back(a.g.get());
    for (const auto& g : a.graphs) out.push_back(g.get());
  }
  return out;
}

std::string Node::label() const {
  if (!name.empty()) return name + " (" + op_type_ + ")";
  return op_type_ + " #" + std::to_string(serial_);
}

}  // namespace amp
