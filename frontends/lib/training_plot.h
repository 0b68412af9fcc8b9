// amp-train --plot: training runs as one picture — each run's loss per step (thin) and its running
// mean (bold), validation losses as dots, steps skipped for inf/NaN gradients as red crosses on the
// mean, and, when a run scaled its loss, the loss scale on a log2 axis below; the legend gives each
// run's time per step, backend memory and validation accuracy. fp32 and mixed precision of
// --compare-fp32 share the axes, so the curves can be compared point by point.
#pragma once

#include <string>
#include <vector>

#include "frontends/lib/svg_chart.h"
#include "frontends/lib/trainer.h"

namespace amp {

struct PlottedRun {
  std::string label;  // "fp32", "fp16", "bf16"
  const TrainResult& result;
};

Chart training_chart(const std::string& title, const std::vector<PlottedRun>& runs);

}  // namespace amp
