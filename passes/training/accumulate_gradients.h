// Gradient accumulation over N micro-batches: each parameter's fp32 gradient is added to an
// accumulator (state); the optimizer reads the mean over the N micro-batches, so N micro-batches of
// B train like one batch of N·B under a mean loss. The step graph gains a bool input apply_update,
// true on every N-th micro-batch: only then do the optimizer's results land, and the accumulators
// restart from zero.
#pragma once

#include <cstdint>

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class AccumulateGradientsPass final : public Pass {
 public:
  AccumulateGradientsPass(TrainingGraph& tg, int64_t micro_batches) : tg_(tg), n_(micro_batches) {}
  std::string name() const override { return "accumulate-gradients"; }
  std::string summary() const override { return "sums gradients over micro-batches; updates on every N-th"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  int64_t n_;
};

}  // namespace amp
