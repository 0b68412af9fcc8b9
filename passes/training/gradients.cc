#include "passes/training/gradients.h"

#include "graph/amp_ops.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph_builder.h"

namespace amp {

bool GradientsPass::run(Model& m) {
  Graph& g = *m.graph;
  const size_t before = g.num_nodes();
  GraphBuilder b(g);
  tg_.seed = b.scalar(1, tg_.loss.loss->dtype());
  std::vector<Value*> wrt;
  for (const TrainedParam& p : tg_.params) wrt.push_back(p.value);
  std::vector<Value*> grads = build_gradients(g, tg_.loss.loss, tg_.seed, wrt);
  std::vector<TrainedParam> kept;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i]) {
      count("parameters without gradient");
      continue;
    }
    kept.push_back(TrainedParam{wrt[i], b.cast(grads[i], DType::kFloat)});
  }
  tg_.params = std::move(kept);
  for (Node* n : g.nodes())
    if (n->domain() == kAmpDomain) {
      m.set_opset_version(kAmpDomain, kAmpDomainVersion);
      count("ai.onnx_amp nodes");
    }
  count("nodes added", static_cast<int64_t>(g.num_nodes() - before));
  return true;
}

}  // namespace amp
