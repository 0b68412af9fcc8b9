// Global-norm gradient clipping with torch.nn.utils.clip_grad_norm_'s formula: the L2 norm over
// all gradients together, and every gradient multiplied by min(1, max_norm / (norm + 1e-6)). The
// norm becomes the step output "grad_norm" for the metrics.
#pragma once

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class ClipGradNormPass final : public Pass {
 public:
  ClipGradNormPass(TrainingGraph& tg, float max_norm) : tg_(tg), max_norm_(max_norm) {}
  std::string name() const override { return "clip-grad-norm"; }
  std::string summary() const override { return "scales all gradients down to a maximum global L2 norm"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  float max_norm_;
};

}  // namespace amp
