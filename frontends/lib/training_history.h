// What a training run did, step by step, kept in memory for the picture amp-train --plot draws
// (the same facts as the --metrics records, which a run may not write).
#pragma once

#include <cstdint>
#include <vector>

namespace amp {

struct TrainingHistory {
  struct Step {
    int64_t step;       // optimizer steps done, counting a resumed run's earlier ones
    double loss;        // mean over the step's micro-batches
    double loss_scale;  // 0 without loss scaling
    bool skipped;       // inf/NaN gradients: the update was not applied
  };
  struct Validation {
    int64_t step;
    double loss;
    double accuracy;  // -1 when the model is not a classifier
  };
  std::vector<Step> steps;
  std::vector<Validation> validations;
};

}  // namespace amp
