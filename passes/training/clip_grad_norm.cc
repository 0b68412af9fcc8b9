#include "passes/training/clip_grad_norm.h"

#include "passes/graph_builder.h"

namespace amp {

bool ClipGradNormPass::run(Model& m) {
  if (max_norm_ <= 0 || tg_.params.empty()) return false;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  const DType f32 = DType::kFloat;
  Value* squares = nullptr;
  for (const TrainedParam& p : tg_.params) {
    Value* s = b.reduce_sum(b.mul(p.grad, p.grad), {}, false);
    squares = squares ? b.add(squares, s) : s;
  }
  Value* norm = b.sqrt(squares);
  norm->set_type(ValueType::tensor(f32, Shape::of({})));
  g.rename_value(norm, g.fresh_name("grad_norm"));
  g.add_output(norm);
  tg_.grad_norm = norm;
  Value* coef = b.min(b.div(b.scalar(max_norm_, f32), b.add(norm, b.scalar(1e-6, f32))), b.scalar(1, f32));
  for (TrainedParam& p : tg_.params) p.grad = b.mul(p.grad, coef);
  count("gradients clipped", static_cast<int64_t>(tg_.params.size()));
  return true;
}

}  // namespace amp
