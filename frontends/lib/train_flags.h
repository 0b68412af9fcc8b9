// amp-train's training settings as words and numbers, the way its flags (and the Python package's
// onnx_amp.Trainer keyword arguments) give them, turned into a TrainingSpec and schedule: one
// reading of "--optimizer adamw --dtype fp16 --loss-scale dynamic" for both.
#pragma once

#include <string>

#include "frontends/lib/trainer.h"

namespace amp {

struct TrainFlags {
  std::string loss, optimizer = "sgd", schedule = "constant", dtype = "fp32", loss_scale, plot;
  double lr = 0.01, momentum = 0, weight_decay = 0, clip_norm = 0, bucket_mb = 25;
  bool nesterov = false, no_shuffle = false, compare_fp32 = false, memory_report = false;
};

// `o` with the flags applied (loss, optimizer, schedule, precision, loss scaling: dynamic for fp16
// and none otherwise unless told). InputError naming the flag for a bad value.
TrainOptions apply_train_flags(TrainOptions o, const TrainFlags& f);

}  // namespace amp
