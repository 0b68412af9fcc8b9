// A Value is one SSA name: a graph input, an initializer, or one output of one node. It knows its
// producer and every (node, input index) that reads it, so passes query use-def chains in O(1).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "graph/attribute.h"
#include "graph/tensor.h"
#include "graph/type.h"

namespace amp {

class Graph;
class Node;

struct Use {
  Node* node;
  size_t index;  // which input of node
  bool operator==(const Use& o) const { return node == o.node && index == o.index; }
};

class Value {
 public:
  const std::string& name() const { return name_; }
  const ValueType& type() const { return type_; }
  void set_type(ValueType t) { type_ = std::move(t); }
  // Element type of a tensor value (kUndefined when not known or not a tensor).
  DType dtype() const { return type_.elem; }
  void set_dtype(DType t);
  Graph* graph() const { return graph_; }
  Node* producer() const { return producer_; }
  size_t output_index() const { return output_index_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool is_input() const { return is_input_; }
  bool is_output() const { return output_refs_ > 0; }
  bool has_initializer() const { return initializer_.has_value(); }
  const Tensor& initializer() const { return *initializer_; }
  Tensor& mutable_initializer() { return *initializer_; }
  const SparseTensor* sparse_initializer() const { return sparse_ ? &*sparse_ : nullptr; }

  std::string doc_string;  // from the value's ValueInfoProto

 private:
  friend class Graph;
  friend class Node;
  Value(Graph* g, std::string name, ValueType t) : graph_(g), name_(std::move(name)), type_(std::move(t)) {}

  Graph* graph_;
  std::string name_;
  ValueType type_;
  Node* producer_ = nullptr;
  size_t output_index_ = 0;
  std::vector<Use> uses_;
  bool is_input_ = false;
  int output_refs_ = 0;
  std::optional<Tensor> initializer_;
  std::optional<SparseTensor> sparse_;
};

}  // namespace amp
