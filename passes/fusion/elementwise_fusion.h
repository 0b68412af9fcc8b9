// Elementwise fusion: chains of elementwise and broadcast ops over one iteration shape — Casts,
// Where and comparisons included — become one ai.onnx_amp FusedElementwise node whose "program"
// attribute (elementwise_program.h) says what each element computes. Scalar Constant nodes are
// inlined as immediates. Values used outside a group stay outputs of the fused node, under their
// own names. On a GPU each group is one generated kernel: one read of the inputs and one write of
// the outputs instead of a round trip through memory per op (GELU: 5 kernels -> 1).
//
// The pieces are separate so a backend can apply the same rule where shapes are concrete (the
// CUDA backend groups at plan time, when every dim is known): the grouping rule over any DAG
// (group_fusion_candidates), the program of one node (node_program), and the merge of per-node
// programs into one (merge_programs).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/fusion/elementwise_program.h"
#include "passes/pass.h"

namespace amp {

// ---- the grouping rule

struct FusionCandidate {
  bool fusable = false;
  std::optional<std::string> shape;  // the op's output shape as a key; unset when unknown
  std::vector<int> producers;        // earlier ops whose outputs it reads (any kind)
};

// Groups of fusable ops, each listed in op order; ops are in topological order. An op joins the
// group of one of its producers when both have the same shape key and joining creates no cycle
// through an op outside the group; an op without a key forms a group alone. Groups smaller than
// min_nodes are dropped.
std::vector<std::vector<int>> group_fusion_candidates(const std::vector<FusionCandidate>& ops, size_t min_nodes);

// ---- programs

// A program together with what its inputs and outputs stand for (value numbers of any numbering).
struct ProgramPart {
  ElementwiseProgram program;
  std::vector<int> inputs, outputs;
};

// True when n can be part of a fused group (a fusable op on float/fp16/bf16/bool tensors).
bool is_fusable_node(const Node& n);
// The program of one fusable node: one output; inputs are its tensor inputs other than scalar
// Constant nodes, which become immediates. `inputs` receives those inputs in order. InputError
// naming the node and op when it is not fusable.
ElementwiseProgram node_program(const Node& n, std::vector<const Value*>* inputs);
// The parts, in dependency order, as one program: a part input that an earlier part outputs reads
// that register instead of becoming an input; the result's outputs are the part outputs for which
// keep(value) is true, in part order.
ProgramPart merge_programs(const std::vector<const ProgramPart*>& parts, const std::function<bool(int)>& keep);

// ---- on graphs

struct FusionGroup {
  std::vector<Node*> nodes;     // in graph order
  std::vector<Value*> inputs;   // the program's inputs, in order
  std::vector<Value*> outputs;  // the program's outputs, in order: values read outside the group
  ElementwiseProgram program;
};

// Shape keys of the nodes' first outputs (nodes in graph order) for grouping: the static (or named
// symbolic) shape where the type has one; otherwise derived through elementwise ops — a result
// has the key its non-scalar inputs share (x / sqrt(2), erf of that, ... all have x's key), and a
// value with nothing to go on gets a key of its own. Rank-0 values never change another operand's
// shape.
std::vector<std::optional<std::string>> shape_keys(const std::vector<Node*>& nodes);

// The groups of at least min_nodes fusable nodes in g, in graph order; g is not changed. Nodes for
// which `claimed` returns true are left out.
std::vector<FusionGroup> find_elementwise_groups(const Graph& g, size_t min_nodes,
                                                 const std::function<bool(const Node*)>& claimed = {});

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
