// One all-finite reduction (ai.onnx_amp AllFinite) over every gradient the optimizer is about to
// read. The optimizer and the loss scale update take its flag: a step with an inf or NaN anywhere
// leaves weights and moments bit-identical and counts as skipped. Runs for fp16 and bf16 training
// (bf16 overflows too, only later), with loss scaling, and where TrainingSpec::check_finite asks:
// amp-train asks in every dtype, fp32 included (a NaN from the data must not reach a weight).
#pragma once

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

class InfCheckPass final : public Pass {
 public:
  explicit InfCheckPass(TrainingGraph& tg) : tg_(tg) {}
  std::string name() const override { return "inf-check"; }
  std::string summary() const override { return "one inf/NaN reduction over all gradients; overflowing steps are skipped"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
};

}  // namespace amp
