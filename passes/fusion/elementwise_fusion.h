// Elementwise fusion: chains of elementwise and broadcast ops over one iteration shape — Casts,
// Where and comparisons included — become one ai.onnx_amp FusedElementwise node whose "program"
// attribute (elementwise_program.h) says what each element computes. Scalar Constant nodes are
// inlined as immediates. Values used outside a group stay outputs of the fused node, under their
// own names. On a GPU each group is one generated kernel: one read of the inputs and one write of
// the outputs instead of a round trip through memory per op (GELU: 5 kernels -> 1).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "passes/fusion/elementwise_program.h"
#include "passes/pass.h"

namespace amp {

struct FusionGroup {
  std::vector<Node*> nodes;     // in graph order
  std::vector<Value*> inputs;   // the program's inputs, in order
  std::vector<Value*> outputs;  // the program's outputs, in order: values read outside the group
  ElementwiseProgram program;
};

// The groups of at least min_nodes fusable nodes in g, in graph order; g is not changed. Nodes for
// which `claimed` returns true (e.g. taken by a GEMM epilogue) are left out. A node joins the group
// of one of its producers when both have the same output shape (static dims or the same symbolic
// names) and joining creates no cycle through a node outside the group.
std::vector<FusionGroup> find_elementwise_groups(const Graph& g, size_t min_nodes,
                                                 const std::function<bool(const Node*)>& claimed = {});

// The program of a single fusable node (a group of one); throws InputError naming the node and op
// when it is not fusable. Backends run lone elementwise ops through the same code generator.
FusionGroup single_node_group(Node* n);
// True when n can be part of a fused group.
bool is_fusable_node(const Node& n);

class ElementwiseFusion final : public Pass {
 public:
  explicit ElementwiseFusion(size_t min_nodes = 2) : min_nodes_(min_nodes) {}
  std::string name() const override { return "elementwise-fusion"; }
  std::string summary() const override {
    return "fuse chains of elementwise and broadcast ops, Casts included, into FusedElementwise nodes";
  }
  bool run(Model& m) override;

 private:
  bool run_on(Graph& g);
  size_t min_nodes_;
};

}  // namespace amp
