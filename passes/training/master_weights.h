// Mixed-precision forward for training: amp-rewrite's colouring and cast insertion (passes/amp)
// with the weights kept fp32 (WeightStorage::kKeep) and Cast at use. The fp32 initializers stay
// the master weights the optimizer updates; the forward and, through the Casts' gradients, the
// backward run on their fp16/bf16 copies, and each gradient arrives back in fp32. Each forward node
// gets its decision record (decision_record.h), so a saved step says why it runs as it does.
#pragma once

#include <map>
#include <string>

#include "passes/amp/amp_passes.h"
#include "passes/pass.h"

namespace amp {

class MasterWeightsPass final : public Pass {
 public:
  // `low`: kFloat16 or kBFloat16; kFloat leaves the model alone. `calibrated`: nodes (by name)
  // that calibration keeps fp32 (amp-train --calibrate; AmpPolicy::keep_calibrated).
  explicit MasterWeightsPass(DType low, std::map<std::string, CalibratedNode> calibrated = {})
      : low_(low), calibrated_(std::move(calibrated)) {}
  std::string name() const override { return "master-weights"; }
  std::string summary() const override { return "low-precision forward over fp32 master weights (Cast at use)"; }
  bool run(Model& m) override;
  const AmpResult& result() const { return result_; }

 private:
  DType low_;
  std::map<std::string, CalibratedNode> calibrated_;
  AmpResult result_;
};

}  // namespace amp
