// A Node is one op application. Inputs are Value pointers (nullptr for an omitted optional input,
// written "" in ONNX); outputs likewise. Setting an input keeps the Values' use lists right.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/attribute.h"
#include "graph/value.h"

namespace amp {

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  void set_op_type(std::string op) { op_type_ = std::move(op); }
  // "" for the default ONNX domain ("ai.onnx" is normalised to "" on import).
  const std::string& domain() const { return domain_; }
  void set_domain(std::string d) { domain_ = std::move(d); }
  // The op type, "<domain>:<op type>" outside the default domain ("Relu", "ai.onnx_amp:Gelu"): the
  // key of the tables that list ops of several domains (op lists, gradient rules, shape rules).
  std::string qualified_op_type() const { return domain_.empty() ? op_type_ : domain_ + ":" + op_type_; }
  std::string name;
  std::string doc_string;

  Graph* graph() const { return graph_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }
  // Replaces input i (growing the list with absent inputs when needed); nullptr makes it absent.
  void set_input(size_t i, Value* v);
  void append_input(Value* v) { set_input(inputs_.size(), v); }
  // Drops inputs from n on.
  void truncate_inputs(size_t n);

  const std::vector<Attribute>& attributes() const { return attrs_; }
  const Attribute* attr(std::string_view name) const;
  Attribute* mutable_attr(std::string_view name);
  void set_attr(Attribute a);  // replaces an attribute of the same name, else appends
  bool remove_attr(std::string_view name);
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  float attr_float(std::string_view name, float fallback) const;
  std::string attr_string(std::string_view name, std::string fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback = {}) const;
  // Subgraph attributes (If branches, Loop and Scan bodies), in attribute order.
  std::vector<Graph*> subgraphs() const;

  // "name (Op)" when named, "Op #k" otherwise: how errors and reports refer to a node.
  std::string label() const;

 private:
  friend class Graph;
  Node(Graph* g, std::string op, std::string domain) : op_type_(std::move(op)), domain_(std::move(domain)), graph_(g) {}

  std::string op_type_;
  std::string domain_;
  Graph* graph_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attrs_;
  std::list<std::unique_ptr<Node>>::iterator pos_;
  size_t serial_ = 0;  // creation order, for stable labels and stable topological sorts
};

}  // namespace amp
