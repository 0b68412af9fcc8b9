// Elementwise fusion as a pass over a graph whose shapes are known: every group of at least
// min_nodes fusable nodes (graph/ops/elementwise_grouping.h, the rule the CUDA backend also
// applies at plan time) becomes one ai.onnx_amp FusedElementwise node whose "program" attribute
// says what each element computes; scalar Constant nodes are inlined as immediates, and values
// used outside a group stay outputs of the fused node, under their own names.
#pragma once

#include <cstddef>
#include <string>

#include "graph/ops/elementwise_grouping.h"
#include "passes/pass.h"

namespace amp {

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
