#include "frontends/lib/non_finite.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "graph/dtype.h"

namespace amp {

std::string NonFiniteCount::text(int64_t of_samples) const {
  return fmt::format("{} NaN and {} inf in {} of {} samples, the first sample {}", nan, inf, samples, of_samples,
                     first_sample);
}

NonFiniteCount count_non_finite(const Tensor& t) {
  NonFiniteCount c;
  if (!is_floating(t.dtype) || t.numel() == 0) return c;
  const int64_t rows = t.dims.empty() ? 1 : t.dims[0];
  const int64_t per_row = rows ? t.numel() / rows : 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool bad = false;
    for (int64_t i = r * per_row; i < (r + 1) * per_row; ++i) {
      const double v = t.element(i);
      if (std::isnan(v)) {
        ++c.nan;
        bad = true;
      } else if (std::isinf(v)) {
        ++c.inf;
        bad = true;
      }
    }
    if (bad && c.samples++ == 0) c.first_sample = r;
  }
  return c;
}

}  // namespace amp
