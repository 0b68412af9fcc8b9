// Each gradient's widening to fp32 and unscaling, moved to just before the first node that reads
// the result (the optimizer's update of that parameter). The backward pass makes the 16-bit
// gradients; the inf/NaN check reads them as they are (AllFiniteScaled), so every one of them must
// exist before any update; the widening Cast and unscaling Mul were emitted right after the
// backward pass, so a backend running the graph in its order held every fp32 gradient too, next to
// every 16-bit one (AlexNet's fp16 step at 1.41x its fp32 step's bytes). Run this way, one fp32
// gradient exists at a time and each 16-bit one is freed by its own update. Only moves nodes later,
// before their first reader, so the graph computes the same values in the same arithmetic.
#pragma once

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class LateUnscalePass final : public Pass {
 public:
  explicit LateUnscalePass(TrainingGraph& tg) : tg_(tg) {}
  std::string name() const override { return "late-unscale"; }
  std::string summary() const override {
    return "widens and unscales each gradient just before its update reads it, not all at once";
  }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
};

}  // namespace amp
