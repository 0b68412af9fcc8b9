// A training step as standard ONNX (--save-training-graph) and back. ONNX runs a training step as
// the inference graph and TrainingInfoProto.algorithm concatenated, the algorithm reading inference
// values by name, and update_binding says which initializer takes which output after a step. So
// the step graph splits without renaming anything:
//   inference graph  the nodes the model's own outputs need (the forward, with its casts), its
//                    inputs, and the initializers they read (weights, BatchNorm statistics);
//   algorithm        everything else — loss, backward, loss scaling, optimizer — with its own inputs
//                    (labels, lr, apply_update), its own initializers (moments, loss scale, counters)
//                    and one output per update_binding value.
// Joining the two gives the step graph back. The names amp-train needs (loss, labels, lr, ...) ride
// along in metadata_props["onnx_amp.training"] as JSON.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "passes/training/training_step.h"

namespace amp {

// metadata_props key of the step's names (loss, labels, lr, loss_scale, all_finite, ...), as JSON.
inline constexpr const char* kTrainingMetadataKey = "onnx_amp.training";

// `state`: the current value of every state tensor (the initializers are written with them).
Model to_training_info_model(const TrainingStep& step, const std::vector<std::pair<std::string, Tensor>>& state);
// Throws InputError naming the file when the model has no training_info amp-train can run.
TrainingStep step_from_training_info(const Model& m);

}  // namespace amp
