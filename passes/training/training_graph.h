// What the training passes share while they turn a forward model into one training step: the
// loss, the trainable parameters and their gradients, and the state the step carries from one run
// to the next (weights, optimizer moments, loss scale, BatchNorm statistics), each state value an
// initializer bound to the graph output that replaces it after a run (TrainingInfoProto's
// update_binding).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"
#include "passes/training/loss.h"

namespace amp {

struct TrainedParam {
  Value* value = nullptr;  // the fp32 master weight (an initializer)
  Value* grad = nullptr;   // its fp32 gradient, once the passes have made it
  // With loss scaling: what grad was before it was unscaled (grad = Mul(scaled_grad, inverse_scale)
  // until a later pass makes grad something else).
  Value* scaled_grad = nullptr;
};

// Names of the step graph's inputs and outputs beyond the model's own.
struct StepNames {
  static constexpr const char* kLearningRate = "lr";             // fp32 scalar input
  static constexpr const char* kApplyUpdate = "apply_update";    // bool scalar input with --accumulate
  static constexpr const char* kLossScale = "loss_scale";        // fp32 scalar state
  static constexpr const char* kGoodSteps = "loss_scale_good_steps";  // fp32 scalar state
  static constexpr const char* kAllFinite = "grads_all_finite";  // bool scalar output
  static constexpr const char* kOptimizerStep = "optimizer_step";     // fp32 scalar state (Adam's t)
};

class TrainingGraph {
 public:
  explicit TrainingGraph(Model& m) : model(m) {}
  Model& model;
  Graph& graph() { return *model.graph; }

  LossInfo loss;
  std::vector<TrainedParam> params;
  Value* seed = nullptr;        // dLoss: the constant 1, or the loss scale
  Value* loss_scale = nullptr;  // fp32 state, when the loss is scaled
  Value* inverse_scale = nullptr;  // fp32 1 / loss_scale, when the loss is scaled
  Value* all_finite = nullptr;  // bool: every gradient finite (null when not checked)
  Value* apply = nullptr;       // bool input: this micro-batch ends an accumulation (null without)
  Value* lr = nullptr;          // fp32 input
  Value* grad_norm = nullptr;   // fp32 output, with clipping
  // State the batch updates outside the optimizer (BatchNorm's running statistics).
  std::vector<Value*> statistics;

  // A new fp32 (or other) state value initialised with `init`, named after `base`.
  Value* add_state(const std::string& base, Tensor init);
  // Marks an existing initializer (a weight, a BatchNorm statistic) as state.
  void keep_state(Value* v);
  // After a run, `state` takes the value of `next`, which becomes a graph output; unless `keep_name`,
  // it is renamed "<state>_next" so the saved step reads well.
  void bind_update(Value* state, Value* next, bool keep_name = false);
  // `state` takes `next` instead of the value bound before, which stops being a graph output and
  // is renamed "<state>_<role>" (e.g. "_this_rank"), so `next` gets the name "<state>_next".
  void rebind_update(Value* state, Value* next, const std::string& role);
  // Whether an update may happen this run: all_finite and apply combined (null when always).
  Value* update_allowed();

  const std::vector<std::string>& state() const { return state_; }
  const std::vector<std::pair<std::string, std::string>>& updates() const { return updates_; }

 private:
  Value* allowed_ = nullptr;
  std::vector<std::string> state_;
  std::vector<std::pair<std::string, std::string>> updates_;
};

}  // namespace amp
