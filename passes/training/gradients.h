// Appends the backward pass: the gradient of the loss with respect to every trainable parameter
// (passes/autodiff), seeded with dLoss = 1 — the loss scale pass swaps in the scale later.
// Parameters the loss does not depend on get no gradient and are left alone by the optimizer,
// as PyTorch leaves parameters whose .grad is None.
#pragma once

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class GradientsPass final : public Pass {
 public:
  explicit GradientsPass(TrainingGraph& tg) : tg_(tg) {}
  std::string name() const override { return "gradients"; }
  std::string summary() const override { return "reverse-mode gradients of the loss for every parameter"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
};

}  // namespace amp
