#include "frontends/lib/train_flags.h"

#include "graph/error.h"

namespace amp {

TrainOptions apply_train_flags(TrainOptions o, const TrainFlags& f) {
  if (!f.loss.empty()) {
    o.spec.loss.kind = loss_kind_from_name(f.loss);
    if (!o.spec.loss.kind) throw InputError("--loss must be cross_entropy, mse or bce_with_logits, not '" + f.loss + "'");
  }
  auto kind = optimizer_kind_from_name(f.optimizer);
  if (!kind) throw InputError("--optimizer must be sgd, adam or adamw, not '" + f.optimizer + "'");
  o.spec.optimizer.kind = *kind;
  o.spec.optimizer.momentum = static_cast<float>(f.momentum);
  o.spec.optimizer.nesterov = f.nesterov;
  o.spec.optimizer.weight_decay = static_cast<float>(f.weight_decay);
  if (!(f.bucket_mb > 0)) throw InputError("--bucket-mb must be positive");
  o.spec.data_parallel.bucket_bytes = static_cast<int64_t>(f.bucket_mb * (1 << 20));
  if (f.nesterov && (f.momentum <= 0 || *kind != OptimizerSpec::Kind::kSgd))
    throw InputError("--nesterov needs --optimizer sgd with --momentum > 0");
  o.spec.clip_norm = static_cast<float>(f.clip_norm);
  auto schedule = schedule_kind_from_name(f.schedule);
  if (!schedule) throw InputError("--schedule must be constant, cosine or linear, not '" + f.schedule + "'");
  o.schedule.kind = *schedule;
  o.schedule.base = f.lr;
  auto dtype = dtype_from_name(f.dtype);
  if (!dtype || (*dtype != DType::kFloat && !is_low_precision(*dtype)))
    throw InputError("--dtype must be fp32, fp16 or bf16, not '" + f.dtype + "'");
  o.spec.precision = *dtype;
  // fp16 needs loss scaling (small gradients underflow); bf16 has fp32's range and needs none.
  LossScaleSpec& scale = o.spec.loss_scale;
  if (f.loss_scale.empty()) {
    scale.mode = *dtype == DType::kFloat16 ? LossScaleSpec::Mode::kDynamic : LossScaleSpec::Mode::kNone;
  } else if (f.loss_scale == "dynamic") {
    scale.mode = LossScaleSpec::Mode::kDynamic;
  } else {
    char* end = nullptr;
    const double v = std::strtod(f.loss_scale.c_str(), &end);
    if (*end || !(v > 0)) throw InputError("--loss-scale must be 'dynamic' or a positive number, not '" + f.loss_scale + "'");
    scale.mode = LossScaleSpec::Mode::kStatic;
    scale.initial = static_cast<float>(v);
  }
  o.shuffle = !f.no_shuffle;
  o.memory_report = f.memory_report;
  return o;
}

}  // namespace amp
