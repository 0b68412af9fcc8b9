#include "passes/training/update_loss_scale.h"

#include "graph/error.h"
#include "passes/graph_builder.h"

namespace amp {

bool UpdateLossScalePass::run(Model& m) {
  if (spec_.mode != LossScaleSpec::Mode::kDynamic) return false;
  if (!tg_.loss_scale || !tg_.all_finite) throw Error("internal: the scale update needs the scale and the finite check");
  GraphBuilder b(*m.graph);
  const DType f32 = DType::kFloat;
  Tensor zero(f32, {});
  Value* scale = tg_.loss_scale;
  Value* good = tg_.add_state(StepNames::kGoodSteps, std::move(zero));
  Value* finite = tg_.all_finite;

  Value* counted = b.where(finite, b.add(good, b.scalar(1, f32)), b.scalar(0, f32));
  Value* grow = b.logical_not(b.less(counted, b.scalar(static_cast<double>(spec_.growth_interval), f32)));
  Value* grown = b.min(b.mul(scale, b.scalar(spec_.growth_factor, f32)), b.scalar(spec_.max_scale, f32));
  Value* backed_off = b.max(b.mul(scale, b.scalar(spec_.backoff_factor, f32)), b.scalar(spec_.min_scale, f32));
  Value* next_scale = b.where(finite, b.where(grow, grown, scale), backed_off);
  Value* next_good = b.where(grow, b.scalar(0, f32), counted);
  if (tg_.apply) {
    next_scale = b.where(tg_.apply, next_scale, scale);
    next_good = b.where(tg_.apply, next_good, good);
  }
  tg_.bind_update(scale, next_scale);
  tg_.bind_update(good, next_good);
  return true;
}

}  // namespace amp
