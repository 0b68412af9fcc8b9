#include "passes/training/training_step.h"

#include "graph/error.h"
#include "passes/fusion/recognize_attention.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "passes/training/accumulate_gradients.h"
#include "passes/training/batch_norm_statistics.h"
#include "passes/training/clip_grad_norm.h"
#include "passes/training/gradients.h"
#include "passes/training/inf_check.h"
#include "passes/training/late_unscale.h"
#include "passes/training/master_weights.h"
#include "passes/training/select_parameters.h"
#include "passes/training/training_graph.h"
#include "passes/training/update_loss_scale.h"

namespace amp {

TrainingStep build_training_step(Model forward, const TrainingSpec& spec) {
  TrainingStep step;
  step.model = std::move(forward);
  Model& m = step.model;
  for (Value* v : m.graph->inputs())
    if (!v->has_initializer()) step.data_inputs.push_back(v->name());
  for (Value* v : m.graph->outputs()) step.model_outputs.push_back(v->name());

  TrainingGraph tg(m);
  tg.loss = add_loss(m, spec.loss);
  if (Value* correct = add_correct_count(*m.graph, tg.loss)) step.correct = correct->name();
  if (tg.loss.labels) step.data_inputs.push_back(tg.loss.labels->name());

  PassManager pipeline(/*verify_each=*/true);
  pipeline.add(std::make_unique<RecognizeGeluPass>());
  // A LayerNorm exported before opset 17 as ReduceMean ... Sqrt, Div: one LayerNormalization
  // (fp32 in every precision, as autocast keeps layer_norm), whose gradient is one
  // LayerNormalizationGrad instead of the chain's dozen, and whose statistics are not rounded to
  // the compute type in between.
  pipeline.add(std::make_unique<RecognizeLayerNormPass>());
  // MatMul, scale, mask, Softmax, MatMul: one Attention whose gradient recomputes the probabilities
  // from one float per row, so the step stores no batch x heads x T x T tensor.
  pipeline.add(std::make_unique<RecognizeAttentionPass>());
  pipeline.add(std::make_unique<SelectParametersPass>(tg, spec.freeze));
  pipeline.add(std::make_unique<MasterWeightsPass>(spec.precision, spec.calibrated));
  pipeline.add(std::make_unique<GradientsPass>(tg));
  pipeline.add(std::make_unique<LossScalePass>(tg, spec.loss_scale));
  pipeline.add(std::make_unique<AccumulateGradientsPass>(tg, spec.accumulate));
  pipeline.add(std::make_unique<BatchNormStatisticsPass>(tg));
  pipeline.add(std::make_unique<AllReduceGradientsPass>(tg, spec.data_parallel));
  const bool check = spec.check_finite || is_low_precision(spec.precision) ||
                     spec.loss_scale.mode != LossScaleSpec::Mode::kNone;
  if (check) pipeline.add(std::make_unique<InfCheckPass>(tg));
  pipeline.add(std::make_unique<ClipGradNormPass>(tg, spec.clip_norm));
  pipeline.add(std::make_unique<OptimizerPass>(tg, spec.optimizer));
  pipeline.add(std::make_unique<UpdateLossScalePass>(tg, spec.loss_scale));
  // Each gradient widened and unscaled next to its update, so one fp32 gradient exists at a time.
  pipeline.add(std::make_unique<LateUnscalePass>(tg));
  pipeline.run(m);

  if (tg.params.empty())
    throw InputError(m.path + ": nothing to train: no float initializer the loss depends on" +
                     (spec.freeze.empty() ? std::string() : " is left by --freeze '" + spec.freeze + "'"));
  step.state = tg.state();
  step.updates = tg.updates();
  for (const TrainedParam& p : tg.params) step.params.push_back(p.value->name());
  step.loss_spec = spec.loss;
  step.loss = tg.loss.loss->name();
  if (tg.loss.target) step.target = tg.loss.target->name();
  if (tg.loss.labels) step.labels = tg.loss.labels->name();
  step.classification = tg.loss.classification;
  step.lr = tg.lr->name();
  if (tg.apply) step.apply_update = tg.apply->name();
  if (tg.all_finite) step.all_finite = tg.all_finite->name();
  if (tg.loss_scale) step.loss_scale = tg.loss_scale->name();
  if (tg.grad_norm) step.grad_norm = tg.grad_norm->name();
  step.passes = pipeline.runs();
  return step;
}

}  // namespace amp
