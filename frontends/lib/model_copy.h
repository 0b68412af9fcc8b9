// A copy of a model's IR that shares the initializers' bytes with the original (Tensor storage is
// copy on write), for calibration's evaluations, each of which rewrites its own copy of the same
// prepared model. clone_model (passes/training/eval_mode.h) serialises to ONNX and parses back,
// copying every weight twice: 0.05 s of the 0.25 s of one evaluation of calibration_models.py's
// ResNet-18 (45 MB of weights) on the project's 2-core machine.
#pragma once

#include "graph/model.h"

namespace amp {

// Nodes, values (types, doc strings), inputs, outputs, initializers (sharing bytes), value_info
// order and the model's fields. A model with subgraphs (If, Loop, Scan) or training_info goes
// through clone_model, which copies them.
Model copy_model(const Model& m);

}  // namespace amp
