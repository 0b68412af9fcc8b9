// Training-mode BatchNormalization computes new running statistics as outputs 1 and 2; the step
// keeps mean and variance as state and binds them to those outputs, so they follow the batches
// as PyTorch's buffers do (they are updated on skipped steps too, as in PyTorch) — but an element
// that would become NaN or inf keeps its value, where PyTorch's buffer would take the NaN.
#pragma once

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class BatchNormStatisticsPass final : public Pass {
 public:
  explicit BatchNormStatisticsPass(TrainingGraph& tg) : tg_(tg) {}
  std::string name() const override { return "batch-norm-statistics"; }
  std::string summary() const override { return "running mean/var of training BatchNormalization become state"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
};

}  // namespace amp
