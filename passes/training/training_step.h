// One training step as one graph (DESIGN.md, "The training step as one graph"): the forward model
// with its loss, the backward pass, gradient processing and the optimizer, with every piece of
// state an initializer bound to its next value. The pipeline is declared here, in order:
//
//   recognize-gelu → recognize-layer-norm → recognize-attention → select-parameters → [master-weights] → gradients → [loss-scale]
//     → [accumulate-gradients]
//     → batch-norm-statistics → [all-reduce-gradients] → [inf-check] → [clip-grad-norm] → optimizer
//     → [update-loss-scale]
//
// (bracketed passes do nothing unless asked for). The all-reduce comes before everything that
// reads the gradients as a whole (the inf/NaN check, clipping, the update), so every rank of a
// data-parallel run decides and updates alike.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "passes/amp/amp_policy.h"
#include "passes/pass_manager.h"
#include "passes/training/loss.h"
#include "passes/training/all_reduce_gradients.h"
#include "passes/training/loss_scale.h"
#include "passes/training/optimizer.h"

namespace amp {

struct TrainingSpec {
  LossSpec loss;
  OptimizerSpec optimizer;
  float clip_norm = 0;      // 0: no clipping
  int64_t accumulate = 1;   // micro-batches per optimizer step
  DType precision = DType::kFloat;  // kFloat16 / kBFloat16: mixed precision over fp32 masters
  LossScaleSpec loss_scale;
  bool check_finite = false;  // the inf/NaN check (on whenever precision is low or the loss scaled)
  std::string freeze;         // regex of parameter names that do not train
  DataParallelSpec data_parallel;
  // Nodes of the forward (by name) that calibration keeps in fp32 (amp-train --calibrate).
  std::map<std::string, CalibratedNode> calibrated;
};

struct TrainingStep {
  Model model;  // the step graph; state values are its initializers
  std::vector<std::string> state;
  std::vector<std::pair<std::string, std::string>> updates;  // state <- output after each run
  std::vector<std::string> params;       // trained parameters (with a gradient)
  std::vector<std::string> data_inputs;  // inputs fed from the data set: the model's inputs and the labels
  std::vector<std::string> model_outputs;  // the forward model's own outputs
  LossSpec loss_spec;                    // as built: the eval model appends the same loss
  std::string loss, target, labels;      // target and labels empty for a model's own loss
  std::string lr;                        // fp32 scalar input
  std::string apply_update;              // bool scalar input, with accumulation
  std::string all_finite;                // bool output, when checked
  std::string loss_scale;                // fp32 state, with dynamic scaling (a constant for static)
  std::string grad_norm;                 // fp32 output, with clipping
  std::string correct;                   // fp32 scalar output: rows predicted right (classification)
  bool classification = false;
  std::vector<PassRun> passes;
};

// Builds the step from a forward model (consumed). Throws InputError for what the model or the
// spec gets wrong (no loss, nothing to train, an op without a gradient rule).
TrainingStep build_training_step(Model forward, const TrainingSpec& spec);

}  // namespace amp
