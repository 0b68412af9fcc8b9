#include "passes/training/inf_check.h"

#include "graph/amp_ops.h"
#include "passes/graph_builder.h"

namespace amp {

bool InfCheckPass::run(Model& m) {
  if (tg_.params.empty()) return false;
  GraphBuilder b(*m.graph);
  std::vector<Value*> grads;
  for (const TrainedParam& p : tg_.params) grads.push_back(p.grad);
  tg_.all_finite = b.emit("AllFinite", grads, {ValueType::tensor(DType::kBool, Shape::of({}))}, {}, kAmpDomain)[0];
  m.graph->rename_value(tg_.all_finite, m.graph->fresh_name(StepNames::kAllFinite));
  m.graph->add_output(tg_.all_finite);
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  count("gradients checked", static_cast<int64_t>(grads.size()));
  return true;
}

}  // namespace amp
