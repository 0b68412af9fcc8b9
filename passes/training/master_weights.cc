#include "passes/training/master_weights.h"

#include "graph/verify.h"

namespace amp {

bool MasterWeightsPass::run(Model& m) {
  if (!is_low_precision(low_)) return false;
  AmpPolicy policy(low_);
  policy.weights = WeightStorage::kKeep;
  policy.keep_io_types = true;
  // The step runs on our backends: bf16 Conv, MaxPool... though opset 17's schemas leave bf16 out.
  policy.beyond_opset_schemas = true;
  for (const auto& [name, why] : calibrated_) policy.keep_calibrated(name, why);
  if (low_ == DType::kBFloat16) m.set_metadata(kBfloat16WhereFloat16Key, "1");
  AmpColourPass(policy, result_).run(m);
  AmpInsertCastsPass(policy, result_).run(m);
  // The step saved with --save-training-graph says why each forward node runs in its precision,
  // as a rewritten model does (amp-inspect --explain, --html).
  AmpRecordDecisionsPass(policy, result_).run(m);
  count("casts added", result_.casts.casts_added);
  count("values retyped", result_.casts.values_retyped);
  return result_.casts.casts_added + result_.casts.values_retyped > 0;
}

}  // namespace amp
