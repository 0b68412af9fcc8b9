// A training-mode export back in inference mode, for validation and for the model --save writes:
// BatchNormalization normalizes with its running statistics (training_mode 0, no statistics
// outputs) and Dropout is the identity (no training_mode input) — PyTorch's model.eval().
#pragma once

#include "passes/pass.h"

namespace amp {

class EvalModePass final : public Pass {
 public:
  std::string name() const override { return "eval-mode"; }
  std::string summary() const override { return "BatchNormalization and Dropout in inference mode"; }
  bool run(Model& m) override;
};

// A deep copy of a model (through its ONNX form), for the variants training needs side by side.
Model clone_model(const Model& m);

}  // namespace amp
