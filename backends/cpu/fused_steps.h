// Elementwise fusion of a compiled program on the CPU: each group of at least two fusable
// elementwise nodes (the rule graph/ops/elementwise_grouping.h gives the fusion pass and the CUDA
// backend) becomes one FusedElementwise step whose program computes what the nodes computed, bit
// for bit; a value of the group leaves it when a step outside the group reads it, it is a graph
// output, or it is named in `keep` (state update sources). The model is not changed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/program.h"
#include "graph/model.h"
#include "graph/ops/elementwise_program.h"

namespace amp::cpu {

struct FusedStep {
  ElementwiseProgram program;
  std::string summary;         // the fused ops, "Mul+Sub+Where"
  std::vector<int> internal;   // values the group computes that no longer leave it
};

// Rewrites p's steps (and `nodes`, the node of each step: null for a fused step) in place;
// `fused` gets, per step, its program when it is a fused step, and `origin` the step's index
// before fusion (a fused step: its last member's), which random ops seed their draws with, so
// that Dropout draws the same masks fused or not. A graph that is not topologically sorted is
// left unfused.
void fuse_elementwise_steps(const Model& m, const std::vector<std::string>& keep, Program& p,
                            std::vector<const Node*>& nodes, std::vector<std::optional<FusedStep>>& fused,
                            std::vector<int>& origin);

}  // namespace amp::cpu
