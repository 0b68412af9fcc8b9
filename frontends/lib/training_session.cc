#include "frontends/lib/training_session.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "frontends/lib/calibrate.h"
#include "frontends/lib/non_finite.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/fusion/recognize_attention.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "passes/name_nodes.h"
#include "passes/training/eval_mode.h"
#include "passes/training/master_weights.h"
#include "passes/training/training_info.h"

namespace amp {

namespace {

Tensor scalar_tensor(float v) {
  Tensor t(DType::kFloat, {});
  *t.mutable_as<float>() = v;
  return t;
}

Tensor bool_tensor(bool v) {
  Tensor t(DType::kBool, {});
  *t.mutable_as<bool>() = v;
  return t;
}

double as_scalar(const Tensor& t) { return t.element(0); }

// Correct predictions: argmax over the last axis of `scores` against the labels.
int64_t correct_predictions(const Tensor& scores, const Tensor& labels) {
  const int64_t rows = labels.numel();
  if (rows == 0 || scores.numel() % rows != 0) return 0;
  const int64_t classes = scores.numel() / rows;
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (scores.element(r * classes + c) > scores.element(r * classes + best)) best = c;
    correct += best == static_cast<int64_t>(labels.element(r));
  }
  return correct;
}

// The forward in eval mode, fp32, as the user's model: what --save writes (with the trained state)
// and what validation's model is made from. Read from the file again: its external data is mapped,
// not copied, so this costs no memory for weights until they are replaced.
Model inference_model(const ModelSource& source) {
  Model m = source.load();
  m.training_info.clear();
  EvalModePass().run(m);
  return m;
}

// Initializers still read from the model's external data (constants that are not state) get bytes
// of their own: a view, however small, keeps the whole mapping, and every page of it the backend
// read while copying the weights, resident.
void own_external_initializers(Model& m) {
  for (Value* v : m.graph->initializers()) {
    const Tensor& t = v->initializer();
    if (!t.external) continue;
    Tensor own = Tensor::from_bytes(t.dtype, t.dims, std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()));
    own.doc_string = t.doc_string;
    m.graph->set_initializer(v, std::move(own));
  }
}

// Drops the model's copy of these initializers (the backend holds them now): each keeps its name,
// type and shape, and no bytes. Nothing may read their data afterwards.
void release_initializers(Model& m, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    Value* v = m.graph->value(name);
    if (!v || !v->has_initializer()) continue;
    const Tensor& t = v->initializer();
    Tensor meta;
    meta.name = t.name;
    meta.dtype = t.dtype;
    meta.dims = t.dims;
    m.graph->set_initializer(v, std::move(meta));
  }
}

// --calibrate: the nodes of the forward (named first, as the step will be) that calibration keeps
// fp32 in the step's mixed-precision forward, measured as MasterWeightsPass places the rest.
std::map<std::string, CalibratedNode> calibrate_forward(Model& forward, const SessionOptions& o,
                                                        std::string& summary) {
  if (!is_low_precision(o.spec.precision)) throw InputError("--calibrate needs --dtype fp16 or bf16");
  NameNodesPass().run(forward);
  Feeds feeds;  // the data's labels and other keys are not the forward's inputs
  for (const auto& [key, t] : o.calibration_feeds) {
    const Value* v = forward.graph->value(key);
    if (v && v->is_input()) feeds.emplace_back(key, t);
  }
  AmpPolicy policy(o.spec.precision);  // MasterWeightsPass's
  policy.weights = WeightStorage::kKeep;
  policy.beyond_opset_schemas = true;
  CalibrationOptions options;
  if (o.calibration_max_error >= 0) options.max_error = o.calibration_max_error;
  if (o.threads > 0) options.threads = o.threads;  // else calibration's own default (calibrate.h)
  options.training_forward = true;
  const CalibrationResult r = calibrate(forward, feeds, policy, options, o.calibration_source);
  if (r.below_floor) throw InputError(o.model.path + ": " + calibration_floor_text(r));
  summary = calibration_summary_text(r);
  r.apply(policy);
  return policy.calibrated_nodes();
}

}  // namespace

// The model --save writes is made at the end from the source and the trained state
// (inference_model), so no copy of the weights outlives compilation.
TrainingSession::TrainingSession(const SessionOptions& o) : o_(o) {
  register_amp_op_schemas();
  const std::string& name = o.model.path;
  Model forward = o.model.load();
  std::map<std::string, CalibratedNode> calibrated;
  if (!o.calibration_source.empty()) {
    if (!forward.training_info.empty())
      throw InputError(name + ": --calibrate calibrates a forward model, not a saved training step");
    calibrated = calibrate_forward(forward, o, calibration_summary_);
  }
  for (const Value* v : forward.graph->initializers()) weights_.insert(v->name());
  if (!forward.training_info.empty()) {
    // A step saved by --save-training-graph: the algorithm graph and the inference graph joined
    // again are the step; the inference graph alone, in eval mode, is the model --save writes.
    step_ = step_from_training_info(forward);
    weights_.clear();
    for (const std::string& param : step_.params) weights_.insert(param);
  } else {
    TrainingSpec spec = o.spec;
    spec.calibrated = calibrated;
    spec.data_parallel.enabled = o.communicator != nullptr;
    // In every dtype: a NaN from the data or an fp32 overflow skips its step as an fp16 overflow
    // does, instead of writing NaN into every weight.
    spec.check_finite = true;
    // Errors about one node (an op without a gradient rule) name the file too, as amp-run's do.
    try {
      step_ = build_training_step(std::move(forward), spec);
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind(name, 0) == 0) throw;
      throw InputError(name + ": " + what);
    }
  }
  bool averages = false;
  for (const Node* n : step_.model.graph->nodes())
    averages = averages || (n->domain() == kAmpDomain && n->op_type() == "AllReduce");
  if (o.communicator && !averages)
    throw InputError(name + ": this training step was saved by a single process: it has no AllReduce to average "
                            "the processes' gradients with; train from the model itself, or save the step from a "
                            "data-parallel run");
  if (o.with_eval) {
    eval_ = inference_model(o.model);
    add_loss(eval_, step_.loss_spec);
    RecognizeGeluPass().run(eval_);  // as the step computes it
    RecognizeLayerNormPass().run(eval_);
    RecognizeAttentionPass().run(eval_);
    if (!calibrated.empty()) NameNodesPass().run(eval_);  // the names calibration used
    MasterWeightsPass(o.spec.precision, calibrated).run(eval_);
  }
  backend_ = make_backend(o.device);
}

std::vector<std::string> TrainingSession::eval_inputs() const {
  std::vector<std::string> inputs;
  if (!o_.with_eval) return inputs;
  for (const Value* v : eval_.graph->inputs())
    if (!v->has_initializer()) inputs.push_back(v->name());
  return inputs;
}

void TrainingSession::compile(uint64_t first_run, uint64_t step_seed) {
  CompileOptions train_options{step_.state, step_.updates, step_seed, o_.threads};
  train_options.first_run = first_run;
  train_options.tf32 = o_.tf32;
  train_options.communicator = o_.communicator;
  train_ = backend_->compile(step_.model, train_options);
  runs_ = first_run;
  // The backend holds the state now: the step's copy (and with it the mapping of the model's
  // external data) goes. --save-training-graph puts the trained state back at the end.
  release_initializers(step_.model, step_.state);
  own_external_initializers(step_.model);
  if (o_.with_eval) {
    for (const Value* v : eval_.graph->initializers())
      if (std::find(step_.state.begin(), step_.state.end(), v->name()) != step_.state.end())
        eval_state_.push_back(v->name());
    CompileOptions eval_options{eval_state_, {}, o_.seed, o_.threads};
    eval_options.tf32 = o_.tf32;
    eval_exe_ = backend_->compile(eval_, eval_options);
    release_initializers(eval_, eval_state_);
    own_external_initializers(eval_);
  }
}

StepOutcome TrainingSession::run_step(const std::function<Feeds(int64_t)>& micro_batch, float lr) {
  std::vector<std::string> fetches{step_.loss};
  // The step counts its correct predictions itself (add_correct_count); a step saved before that
  // hands out its scores instead, and the host counts.
  const bool counted = !step_.correct.empty();
  const size_t target_at = step_.classification ? fetches.size() : 0;
  if (step_.classification) fetches.push_back(counted ? step_.correct : step_.target);
  const size_t finite_at = step_.all_finite.empty() ? 0 : fetches.size();
  if (!step_.all_finite.empty()) fetches.push_back(step_.all_finite);
  const size_t scale_at = step_.loss_scale.empty() ? 0 : fetches.size();
  if (!step_.loss_scale.empty()) fetches.push_back(step_.loss_scale);

  StepOutcome out;
  out.device_ms = 0;
  double loss_sum = 0;
  const int64_t accumulate = o_.spec.accumulate;
  for (int64_t m = 0; m < accumulate; ++m) {
    Feeds feeds = micro_batch(m);
    feeds.emplace_back(step_.lr, scalar_tensor(lr));
    if (!step_.apply_update.empty()) feeds.emplace_back(step_.apply_update, bool_tensor(m == accumulate - 1));
    std::vector<Tensor> got = train_->run(feeds, fetches);
    ++runs_;
    const double device_ms = train_->last_run_device_ms();
    out.device_ms = device_ms < 0 || out.device_ms < 0 ? -1 : out.device_ms + device_ms;
    step_memory_ = train_->memory();
    loss_sum += as_scalar(got[0]);
    if (step_.classification && counted) out.correct += static_cast<int64_t>(std::llround(as_scalar(got[target_at])));
    if (step_.classification && !counted)
      for (const auto& [key, t] : feeds)
        if (key == step_.labels) out.correct += correct_predictions(got[target_at], t);
    if (finite_at && m == accumulate - 1) out.skipped = as_scalar(got[finite_at]) == 0;
    if (scale_at) out.loss_scale = as_scalar(got[scale_at]);
  }
  out.loss = loss_sum / static_cast<double>(accumulate);
  return out;
}

void TrainingSession::begin_evaluation() {
  if (!eval_exe_) throw Error("the training session was made without its evaluation model");
  // One arena at a time: the step plans again after evaluation.
  train_->trim();
  for (const std::string& name : eval_state_) eval_exe_->write_state(name, train_->read_state(name));
}

void TrainingSession::evaluate(Feeds data, EvaluationTotals& totals) {
  const std::string loss_name = eval_.graph->outputs().back()->name();
  int64_t rows = 0;
  for (const auto& [key, t] : data) rows = t.dims.empty() ? 1 : t.dims[0];
  std::vector<std::string> fetches{loss_name};
  if (!step_.target.empty()) fetches.push_back(step_.target);
  std::vector<Tensor> out = eval_exe_->run(data, fetches);
  totals.loss_sum += as_scalar(out[0]) * static_cast<double>(rows);
  if (step_.classification)
    for (const auto& [key, t] : data)
      if (key == step_.labels) totals.correct += correct_predictions(out[1], t);
  // Samples whose outputs hold a NaN or inf: counted, since the mean loss alone would only be NaN.
  if (!step_.target.empty()) totals.non_finite += count_non_finite(out[1]).samples;
  totals.seen += rows;
}

void TrainingSession::end_evaluation() {
  const MemoryStats m = eval_exe_->memory();
  eval_bytes_ = std::max(eval_bytes_, m.state_bytes + m.arena_bytes + m.constant_bytes);
  eval_exe_->trim();
}

std::vector<std::pair<std::string, Tensor>> TrainingSession::state() const {
  std::vector<std::pair<std::string, Tensor>> all;
  for (const std::string& name : train_->state_names()) all.emplace_back(name, train_->read_state(name));
  return all;
}

void TrainingSession::restore_state(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& source) {
  const auto names = train_->state_names();
  for (const auto& [name, t] : state) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw InputError(source + " holds '" + name + "', which the training step does not have");
    train_->write_state(name, t);
  }
  if (state.size() != names.size())
    throw InputError(source + " holds " + std::to_string(state.size()) + " state tensors, the step has " +
                     std::to_string(names.size()));
}

Model TrainingSession::trained_model() const {
  Model out = inference_model(o_.model);
  const auto names = train_->state_names();
  for (Value* v : out.graph->initializers())
    if (std::find(names.begin(), names.end(), v->name()) != names.end())
      out.graph->set_initializer(v, train_->read_state(v->name()));
  return out;
}

Model TrainingSession::training_graph() {
  // The step's initializers were released after compiling: the trained state takes their place.
  Graph& g = *step_.model.graph;
  for (const std::string& name : train_->state_names())
    if (Value* v = g.value(name); v && v->has_initializer()) g.set_initializer(v, train_->read_state(name));
  Model saved = to_training_info_model(step_, {});
  release_initializers(step_.model, step_.state);
  return saved;
}

void TrainingSession::trim() { train_->trim(); }

}  // namespace amp
