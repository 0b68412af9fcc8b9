// Chooses the trainable parameters: float initializers on the loss's path, except those matching
// --freeze (std::regex over the whole name) and BatchNormalization's running statistics, which
// the forward pass updates itself. Non-float initializers (masks, shapes) never train.
#pragma once

#include <regex>
#include <string>

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class SelectParametersPass final : public Pass {
 public:
  // Throws InputError for a pattern std::regex rejects.
  SelectParametersPass(TrainingGraph& tg, const std::string& freeze);
  std::string name() const override { return "select-parameters"; }
  std::string summary() const override { return "float initializers become trainable parameters unless frozen"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  std::string pattern_;
  std::regex freeze_;
};

}  // namespace amp
