// Loss scaling for fp16 training: the backward pass starts from dLoss = scale instead of 1, so
// small gradients stay above fp16's subnormal floor (5.96e-8), and the fp32 gradients are
// multiplied by 1/scale before anyone reads them. The scale is a constant (--loss-scale N) or fp32
// state that UpdateLossScalePass moves with GradScaler's rule — no host round trip either way.
#pragma once

#include <cstdint>

#include "passes/pass.h"
#include "passes/training/training_graph.h"

namespace amp {

struct LossScaleSpec {
  enum class Mode { kNone, kStatic, kDynamic };
  Mode mode = Mode::kNone;
  float initial = 65536.0f;  // 2^16, GradScaler's init_scale; the value itself when static
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  float min_scale = 1.0f;          // bounds as ONNX Runtime's dynamic scaler: [1, 2^24]
  float max_scale = 16777216.0f;
};

class LossScalePass final : public Pass {
 public:
  LossScalePass(TrainingGraph& tg, const LossScaleSpec& spec) : tg_(tg), spec_(spec) {}
  std::string name() const override { return "loss-scale"; }
  std::string summary() const override { return "seeds the backward pass with the loss scale, unscales gradients"; }
  bool run(Model& m) override;

 private:
  TrainingGraph& tg_;
  LossScaleSpec spec_;
};

}  // namespace amp
