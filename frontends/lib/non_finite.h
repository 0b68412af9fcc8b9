// Counting NaN and inf in arrays whose first axis is the sample: what the data loaders report once
// at load, what validation and amp-run report about outputs — instead of averaging them away.
#pragma once

#include <cstdint>
#include <string>

#include "graph/tensor.h"

namespace amp {

struct NonFiniteCount {
  int64_t nan = 0, inf = 0;  // elements
  int64_t samples = 0;       // samples (rows of the first axis) holding at least one
  int64_t first_sample = -1;

  bool any() const { return nan + inf > 0; }
  // "3 NaN and 1 inf in 2 of 100 samples, the first sample 17"
  std::string text(int64_t of_samples) const;
};

// Zero counts for tensors that are not floating point; a scalar is one sample.
NonFiniteCount count_non_finite(const Tensor& t);

}  // namespace amp
