// The learning rate of each optimizer step, computed on the host and fed to the step graph's "lr"
// input (a scalar per step costs nothing to send). Linear warm-up from base/warmup to base over
// the first `warmup` steps, then constant, cosine (to 0 at the last step, as CosineAnnealingLR with
// T_max = the remaining steps) or linear decay (to 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace amp {

struct LrSchedule {
  enum class Kind { kConstant, kCosine, kLinear };
  Kind kind = Kind::kConstant;
  double base = 0.01;
  int64_t warmup = 0;
  int64_t total = 1;  // optimizer steps of the whole run

  double at(int64_t step) const;  // step counts from 0
};

std::optional<LrSchedule::Kind> schedule_kind_from_name(const std::string& name);  // constant, cosine, linear

}  // namespace amp
