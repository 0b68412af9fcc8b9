// Makes a colouring real: low-precision nodes get low-precision data inputs and outputs, and a Cast
// sits on every edge whose two ends want different types. One Cast per (value, type), shared by all
// its consumers, placed right after the value's producer; Casts already in the graph are reused.
// Free values (constants, initializers, casts from non-float types, and graph inputs without
// keep_io_types) wanted only in the low type are converted once instead: Constants always,
// initializers under WeightStorage::kLowPrecision, casts by changing their 'to'. Converted values
// beyond the target's range are clamped to its largest finite value (fp16: ±65504) and reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/model.h"
#include "passes/amp/amp_policy.h"
#include "passes/amp/colour.h"

namespace amp {

// One converted tensor whose values did not all fit the target type.
struct ClampRecord {
  std::string tensor;          // initializer name, or the Constant's output name
  int64_t clamped = 0;         // finite values beyond ±max, set to ±max
  double max_error = 0;        // the largest |value - clamped value|
  int64_t flushed_to_zero = 0; // non-zero values too small for the target, now zero
  int64_t raised = 0;          // non-zero values below AmpPolicy::min_magnitude, set to +-min_magnitude
};

struct CastReport {
  int64_t casts_added = 0;
  int64_t casts_retargeted = 0;       // existing Casts from non-float types whose 'to' changed
  int64_t values_retyped = 0;         // node outputs now in the low type
  int64_t constants_converted = 0;    // Constants and initializers stored in the low type
  std::vector<ClampRecord> clamps;
  // fp32 weights kept under WeightStorage::kKeep with values beyond the target's range: a Cast at
  // use turns those into inf. One line each.
  std::vector<std::string> warnings;
};

// `decisions` must come from colour() on this model, unedited since. Leaves the graph sorted and
// typed; existing value_info entries keep their order and new values are appended.
CastReport insert_casts(Model& m, const AmpPolicy& policy, const AmpDecisions& decisions);

// fp32 tensor -> target type, clamping to the target's largest finite value (NaN and inf kept) and
// raising non-zero magnitudes below min_magnitude to it.
Tensor convert_tensor(const Tensor& t, DType target, ClampRecord* record, float min_magnitude = 0);

}  // namespace amp
