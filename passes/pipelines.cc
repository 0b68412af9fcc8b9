#include "passes/pipelines.h"

#include "passes/amp/cast_cleanup.h"
#include "passes/amp/flatten_linear.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "passes/name_nodes.h"

namespace amp {

namespace {

void add_amp_prepare(PassManager& pm) {
  pm.add(std::make_unique<NameNodesPass>());
  pm.add(std::make_unique<RecognizeLayerNormPass>());
  pm.add(std::make_unique<CastCleanupPass>());
}

}  // namespace

PassManager amp_prepare_pipeline(bool verify_each) {
  PassManager pm(verify_each);
  add_amp_prepare(pm);
  return pm;
}

PassManager amp_rewrite_pipeline(const AmpPolicy& policy, AmpResult& result, bool verify_each) {
  PassManager pm(verify_each);
  add_amp_prepare(pm);
  if (policy.cast_placement == CastPlacement::kCompute) pm.add(std::make_unique<FlattenLinearPass>(policy));
  pm.add(std::make_unique<AmpColourPass>(policy, result));
  pm.add(std::make_unique<AmpInsertCastsPass>(policy, result));
  pm.add(std::make_unique<CastCleanupPass>());
  pm.add(std::make_unique<AmpRecordDecisionsPass>(policy, result));
  return pm;
}

}  // namespace amp
