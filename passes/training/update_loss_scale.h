// The dynamic loss scale's update, with torch.amp.GradScaler's rule: on a step whose gradients are
// all finite the good-step count grows, and after growth_interval of them the scale doubles (up to
// the maximum) and the count restarts; on overflow the scale halves (down to the minimum) and the
// count restarts. With gradient accumulation only the micro-batch that applies the update counts.
#pragma once

#include "passes/pass.h"
#include "passes/training/loss_scale.h"

namespace amp {

class UpdateLossScalePass final : public Pass {
 public:
  UpdateLossScalePass(TrainingGraph& tg, const LossScaleSpec& spec) : tg_(tg), spec_(spec) {}
  std::string name() const override { return "update-loss-scale"; }
  std::string summary() const override { return "grows the loss scale after finite steps, backs it off on overflow"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  LossScaleSpec spec_;
};

}  // namespace amp
