#include "passes/training/accumulate_gradients.h"

#include "passes/graph_builder.h"

namespace amp {

bool AccumulateGradientsPass::run(Model& m) {
  if (n_ <= 1) return false;
  Graph& g = *m.graph;
  GraphBuilder b(g);
  tg_.apply = g.add_input(g.fresh_name(StepNames::kApplyUpdate), ValueType::tensor(DType::kBool, Shape::of({})));
  Value* zero = b.scalar(0, DType::kFloat);
  Value* share = b.scalar(1.0 / static_cast<double>(n_), DType::kFloat);
  for (TrainedParam& p : tg_.params) {
    Value* acc = tg_.add_state(p.value->name() + ".grad_accumulator", Tensor(DType::kFloat, p.value->initializer().dims));
    Value* sum = b.add(acc, p.grad);
    tg_.bind_update(acc, b.where(tg_.apply, zero, sum));
    p.grad = b.mul(sum, share);
    count("accumulators");
  }
  return true;
}

}  // namespace amp
