// What may become one fused elementwise kernel, and its program: chains of elementwise and
// broadcast ops over one iteration shape — Casts, Where and comparisons included — whose program
// (elementwise_program.h) says what each element computes. Scalar Constant nodes are inlined as
// immediates; values used outside a group stay outputs of it. On a GPU each group is one
// generated kernel: one read of the inputs and one write of the outputs instead of a round trip
// through memory per op (GELU: 5 kernels -> 1).
//
// The rule lives below passes/ and backends/ because both apply it: the fusion pass
// (passes/fusion/elementwise_fusion.h) to a graph whose shapes are known, the CUDA backend at plan
// time, when every dim is known. Its pieces: the grouping over any DAG (group_fusion_candidates),
// the program of one node (node_program), and the merge of per-node programs into one
// (merge_programs).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/ops/elementwise_program.h"

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
// The same groups as node lists. A pass rewriting the graph group by group builds each group
// (make_fusion_group) just before rewriting it, because rewriting one replaces values the next reads.
std::vector<std::vector<Node*>> find_elementwise_group_nodes(const Graph& g, size_t min_nodes,
                                                             const std::function<bool(const Node*)>& claimed = {});
// The group of these nodes (in graph order): their merged program, its inputs and outputs.
FusionGroup make_fusion_group(std::vector<Node*> nodes);
// True for a value a program reads as an immediate: the output of a one-element Constant node.
bool is_inlined_constant(const Value* v);

}  // namespace amp
