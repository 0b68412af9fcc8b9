// A node's subgraph (an If branch, a Loop or Scan body) compiled once by this backend as a model
// of its own (graph/subgraph_model.h). The values it reads from the graphs around it arrive as the
// node's inputs after its own (backends/program.h); run() feeds them to the body without copying.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kernel.h"
#include "graph/model.h"

namespace amp::cpu {

class CompiledSubgraph {
 public:
  // `body` is a subgraph of node n (errors name n and the body).
  CompiledSubgraph(const Node& n, const Graph& body, int64_t opset);

  const Graph& graph() const { return *model_.graph; }
  // The body's own inputs (the enclosing reads follow them in graph().inputs()).
  size_t own_inputs() const { return own_inputs_; }
  // Whether enclosing read i (the body's input own_inputs() + i) is an initializer there, whose
  // contents a plan may read (as shape rules read constants).
  bool enclosing_initializer(size_t i) const { return enclosing_initializer_[i]; }
  // Runs the body on its own inputs `own` (views into tensors that outlive the call), reading the
  // enclosing values from io's inputs from `first_outer` on; returns its outputs.
  std::vector<Tensor> run(const std::vector<const View*>& own, const KernelIO& io, size_t first_outer) const;
  // The same, for own inputs held as tensors.
  std::vector<Tensor> run(const std::vector<Tensor>& own, const KernelIO& io, size_t first_outer) const;

 private:
  Model model_;
  size_t own_inputs_;
  std::vector<bool> enclosing_initializer_;
  std::vector<std::string> input_names_, output_names_;
  mutable std::unique_ptr<Executable> exe_;  // runs from a const kernel; its plans are its own
};

// A tensor that views v's bytes (no copy); valid while v's buffer is.
Tensor view_of(const View& v);

}  // namespace amp::cpu
