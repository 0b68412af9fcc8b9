// The optimizer step as standard ONNX ops over fp32 master weights and fp32 state, with PyTorch's
// semantics and operation order (torch.optim.SGD with momentum / nesterov / weight_decay as L2,
// Adam with L2 weight decay, AdamW with decoupled decay). Standard ops rather than one fused op per
// tensor, so the saved training step runs on any ONNX runtime; a backend may fuse them.
// When the step can be skipped (inf check, accumulation) every new value goes through
// Where(allowed, new, old), so a skipped step leaves weights, moments and Adam's step count
// bit-identical. The learning rate is the step input "lr": schedules live with the caller.
#pragma once

#include <optional>
#include <string>

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

struct OptimizerSpec {
  enum class Kind { kSgd, kAdam, kAdamW };
  Kind kind = Kind::kSgd;
  float momentum = 0.0f;  // SGD
  bool nesterov = false;  // SGD
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;  // Adam, AdamW
};
std::optional<OptimizerSpec::Kind> optimizer_kind_from_name(const std::string& name);  // sgd, adam, adamw
const char* optimizer_kind_name(OptimizerSpec::Kind k);

class OptimizerPass final : public Pass {
 public:
  OptimizerPass(TrainingGraph& tg, const OptimizerSpec& spec) : tg_(tg), spec_(spec) {}
  std::string name() const override { return "optimizer"; }
  std::string summary() const override { return "SGD / Adam / AdamW update of every parameter, in the graph"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  OptimizerSpec spec_;
};

}  // namespace amp
