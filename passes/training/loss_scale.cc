#include "passes/training/loss_scale.h"

#include "graph/error.h"
#include "passes/graph_builder.h"

namespace amp {

namespace {

Tensor fp32_scalar(float v) {
  Tensor t(DType::kFloat, {});
  *t.mutable_as<float>() = v;
  return t;
}

}  // namespace

bool LossScalePass::run(Model& m) {
  if (spec_.mode == LossScaleSpec::Mode::kNone) return false;
  if (!tg_.seed) throw Error("internal: the loss scale pass runs after the gradients pass");
  Graph& g = *m.graph;
  GraphBuilder b(g);
  Value* scale = spec_.mode == LossScaleSpec::Mode::kStatic
                     ? b.scalar(spec_.initial, DType::kFloat)
                     : tg_.add_state(StepNames::kLossScale, fp32_scalar(spec_.initial));
  // The backward nodes read the seed: the scale must exist before them, where the seed was made.
  if (Node* made = scale->producer(); made && tg_.seed->producer()) g.move_before(made, tg_.seed->producer());
  g.replace_all_uses(tg_.seed, scale);
  if (Node* constant = tg_.seed->producer(); constant && tg_.seed->uses().empty()) g.remove_node(constant);
  tg_.seed = scale;
  tg_.loss_scale = scale;
  // 1/scale in fp32, as GradScaler's inv_scale; exact for the powers of two the dynamic scale takes.
  // Both are typed in full (a scalar; the gradient's shape): a backend that fuses elementwise
  // work by shape can then fuse each unscaling with its update instead of keeping the unscaled
  // fp32 gradient in memory.
  Value* inverse = b.div(b.scalar(1, DType::kFloat), scale);
  inverse->set_type(ValueType::tensor(DType::kFloat, Shape::of({})));
  tg_.inverse_scale = inverse;
  for (TrainedParam& p : tg_.params) {
    p.scaled_grad = p.grad;
    p.grad = b.mul(p.grad, inverse);
    p.grad->set_type(p.scaled_grad->type());
  }
  count("gradients unscaled", static_cast<int64_t>(tg_.params.size()));
  return true;
}

}  // namespace amp
