// Graph: nodes in a list (kept topologically ordered by passes), values by name, graph inputs,
// outputs, initializers and value_info order. The editing API below is the only way passes change
// a graph, so use lists, producers and names never go stale.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/node.h"
#include "graph/value.h"

namespace amp {

class Graph {
 public:
  // A subgraph passes its enclosing graph: its nodes may read the parent's values, and fresh names
  // are drawn from one table shared by the whole model.
  explicit Graph(Graph* parent = nullptr);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::string name;
  std::string doc_string;
  Graph* parent() const { return parent_; }

  // ---- values
  Value* value(std::string_view name) const;   // defined in this graph
  Value* lookup(std::string_view name) const;  // this graph, then the enclosing ones
  // A new value; throws if the name is already visible in this scope.
  Value* create_value(const std::string& name, ValueType type = {});
  // A name used nowhere in the model, derived from base ("x" -> "x", "x_1", ...).
  std::string fresh_name(std::string_view base);
  void rename_value(Value* v, const std::string& name);
  // Deletes a value that has no producer, no uses and is not a graph input/output/initializer.
  void erase_value(Value* v);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* add_input(const std::string& name, ValueType type);
  void mark_input(Value* v);        // an existing value (e.g. an initializer) becomes a graph input too
  void remove_input(Value* v);      // stays a value; erased if nothing else keeps it
  void add_output(Value* v);
  void set_output(size_t i, Value* v);
  void remove_output(size_t i);

  const std::vector<Value*>& initializers() const { return initializers_; }
  Value* add_initializer(Tensor t);          // value named t.name, typed from the tensor
  void set_initializer(Value* v, Tensor t);  // attach / replace data of an existing value
  void remove_initializer(Value* v);         // drops the data; the value is erased if unused
  const std::vector<Value*>& sparse_initializers() const { return sparse_initializers_; }
  Value* add_sparse_initializer(const std::string& name, SparseTensor t);
  // Values that had (and will get) a ValueInfoProto entry, in file order.
  std::vector<Value*>& value_info() { return value_info_; }
  const std::vector<Value*>& value_info() const { return value_info_; }

  // ---- nodes
  using NodeList = std::list<std::unique_ptr<Node>>;
  class NodeRange {
   public:
    class iterator {
     public:
      explicit iterator(NodeList::const_iterator it) : it_(it) {}
      Node* operator*() const { return it_->get(); }
      iterator& operator++() { ++it_; return *this; }
      bool operator!=(const iterator& o) const { return it_ != o.it_; }
      bool operator==(const iterator& o) const { return it_ == o.it_; }
     private:
      NodeList::const_iterator it_;
    };
    explicit NodeRange(const NodeList& l) : l_(l) {}
    iterator begin() const { return iterator(l_.begin()); }
    iterator end() const { return iterator(l_.end()); }
   private:
    const NodeList& l_;
  };
  NodeRange nodes() const { return NodeRange(nodes_); }
  std::vector<Node*> node_vector() const;  // a snapshot, safe to iterate while editing
  size_t num_nodes() const { return nodes_.size(); }

  // Creates a node before `before` (at the end when null). Outputs get the given names, or fresh
  // names "<base>_<i>" for empty entries; an output name of "\0" (use kAbsent) makes it absent.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<std::string>& output_names, const std::string& domain = "",
                 Node* before = nullptr);
  // Convenience: n outputs with fresh names derived from op_type.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                 Node* before = nullptr);
  void move_before(Node* n, Node* pos);  // pos null: to the end
  // Removes a node whose outputs are unused (throws otherwise); its outputs are erased.
  void remove_node(Node* n);
  // Every read of `from` (node inputs here and in nested subgraphs, graph outputs) reads `to`.
  void replace_all_uses(Value* from, Value* to);
  // Adds a node output (renaming it when the name is taken is the caller's job).
  Value* add_node_output(Node* n, const std::string& name);

  // Stable topological order: nodes keep their relative order unless a dependency forces a move.
  // Reads by nested subgraphs count as reads by their node. Throws naming a node on a cycle.
  void topological_sort();
  bool is_topologically_sorted() const;

  // Every value read by n, including those read by its subgraphs from enclosing scopes.
  static std::vector<Value*> all_reads(const Node* n);

  static const std::string kAbsent;

 private:
  Node* insert_node(std::unique_ptr<Node> n, Node* before);
  void register_name(const std::string& name);

  Graph* parent_;
  std::shared_ptr<std::unordered_set<std::string>> all_names_;
  std::unordered_map<std::string, std::unique_ptr<Value>> values_;
  NodeList nodes_;
  size_t next_serial_ = 0;
  std::vector<Value*> inputs_, outputs_, initializers_, sparse_initializers_, value_info_;
};

}  // namespace amp
