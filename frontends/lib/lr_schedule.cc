#include "frontends/lib/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace amp {

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return base * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  switch (kind) {
    case Kind::kConstant: return base;
    case Kind::kCosine: return base * 0.5 * (1.0 + std::cos(M_PI * progress));
    case Kind::kLinear: return base * (1.0 - progress);
  }
  return base;
}

std::optional<LrSchedule::Kind> schedule_kind_from_name(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::kConstant;
  if (name == "cosine") return LrSchedule::Kind::kCosine;
  if (name == "linear") return LrSchedule::Kind::kLinear;
  return std::nullopt;
}

}  // namespace amp
