// A training step built from a model and compiled on a backend, run one optimizer step at a time:
// what amp-train's loop (trainer.cc) drives over its data files and what the Python package's
// onnx_amp.Trainer drives from the user's own batches. Both therefore run the same step on the same
// feeds and get the same losses, bit for bit. Also here: its evaluation twin (the forward in eval
// mode with the same loss, same precision), its state, and the models written from it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"
#include "frontends/lib/model_source.h"
#include "graph/model.h"
#include "passes/training/training_step.h"

namespace amp {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

struct SessionOptions {
  ModelSource model;
  TrainingSpec spec;
  std::string device = "cpu";
  uint64_t seed = 0;  // dropout masks of the step and of evaluation
  int threads = 0;
  bool tf32 = false;
  bool with_eval = false;  // build and compile the evaluation model too
  std::shared_ptr<Communicator> communicator;  // null: one process
  // amp-train --calibrate DATA.npz [--max-error E] (calibrate.h): the forward's nodes that break
  // accuracy on these feeds stay fp32 in the step; keys that are not inputs of the forward (labels)
  // are ignored. calibration_source names the feeds in errors; calibration_max_error < 0: the
  // default E.
  Feeds calibration_feeds;
  std::string calibration_source;
  double calibration_max_error = -1;
};

// One optimizer step (its micro-batches) as the step graph reported it.
struct StepOutcome {
  double loss = 0;        // mean over the micro-batches
  int64_t correct = 0;    // argmax hits over all micro-batches (classifiers)
  bool skipped = false;   // inf/NaN gradients: nothing was applied
  double loss_scale = 0;  // after the step; 0 without loss scaling
  // The device's milliseconds over the micro-batches' runs (Executable::last_run_device_ms);
  // negative where the backend does not measure them.
  double device_ms = -1;
};

// Sums over evaluation batches (a data-parallel run adds the processes' sums).
struct EvaluationTotals {
  double loss_sum = 0;  // loss × rows, per batch
  int64_t correct = 0, seen = 0, non_finite = 0;
  double loss() const { return seen ? loss_sum / static_cast<double>(seen) : 0; }
  double accuracy() const { return seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0; }
};

class TrainingSession {
 public:
  // Builds the step (or reads one saved by --save-training-graph) and, with_eval, the evaluation
  // model, and makes the backend; compile() then compiles them. InputError for what the model or
  // spec gets wrong, naming the file, node and op.
  explicit TrainingSession(const SessionOptions& o);

  // `first_run`: backend runs an earlier session of this step made (a resumed run: random ops
  // continue their stream); `step_seed`: the step's dropout seed (a replica's own).
  void compile(uint64_t first_run, uint64_t step_seed);

  const TrainingStep& step() const { return step_; }
  const Model& eval_model() const { return eval_; }  // an empty graph without with_eval
  bool has_evaluation() const { return o_.with_eval; }
  // The inputs a batch must hold: the step's data inputs, or the evaluation model's.
  std::vector<std::string> eval_inputs() const;
  // Initializers of the model as given: its weights, not the optimizer's state.
  const std::set<std::string>& weights() const { return weights_; }
  const Backend& backend() const { return *backend_; }
  // With calibration_feeds: calibration's summary lines (calibration_summary_text); empty otherwise.
  const std::string& calibration_summary() const { return calibration_summary_; }

  // One optimizer step of spec.accumulate micro-batches; micro_batch(m) gives the m-th one's data
  // inputs (conform()ed to the step graph). `lr` is fed as the step's learning rate.
  StepOutcome run_step(const std::function<Feeds(int64_t)>& micro_batch, float lr);
  // A later micro-batch's data, handed to the backend to move ahead of its step (Executable::
  // prefetch); safe from a loader's thread while run_step runs.
  void prefetch(const Feeds& micro_batch) { train_->prefetch(micro_batch); }
  uint64_t runs() const { return runs_; }  // backend runs so far, first_run included

  // Evaluation: begin_evaluation() copies the trained state into the evaluation model, evaluate()
  // runs one batch (its data inputs conform()ed to eval_inputs()), end_evaluation() drops its plan.
  void begin_evaluation();
  void evaluate(Feeds data, EvaluationTotals& totals);
  void end_evaluation();

  std::vector<std::string> state_names() const { return train_->state_names(); }
  Tensor read_state(const std::string& name) const { return train_->read_state(name); }
  void write_state(const std::string& name, const Tensor& t) { train_->write_state(name, t); }
  std::vector<std::pair<std::string, Tensor>> state() const;
  // Writes every state tensor (a checkpoint's, a state_dict's): InputError, naming `source`
  // ("DIR: the checkpoint"), for a name the step lacks or a tensor missing.
  void restore_state(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& source);

  // The forward in eval mode, fp32, as the user's model, with the trained weights: what
  // amp-train --save writes.
  Model trained_model() const;
  // The step as ONNX with training_info and the trained state: --save-training-graph.
  Model training_graph();

  MemoryStats step_memory() const { return step_memory_; }  // as the latest run planned it
  size_t eval_bytes() const { return eval_bytes_; }  // the evaluation executable at its largest
  // Drops the step's plans and arena (before copies of the state are made).
  void trim();

 private:
  SessionOptions o_;
  TrainingStep step_;
  Model eval_;
  std::set<std::string> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executable> train_, eval_exe_;
  std::vector<std::string> eval_state_;
  uint64_t runs_ = 0;
  MemoryStats step_memory_;
  size_t eval_bytes_ = 0;
  std::string calibration_summary_;
};

}  // namespace amp
