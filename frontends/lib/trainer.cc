#include "frontends/lib/trainer.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>

#include "backends/backend.h"
#include "frontends/lib/checkpoint.h"
#include "frontends/lib/metrics_log.h"
#include "frontends/lib/training_data.h"
#include "frontends/lib/training_progress.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/training/eval_mode.h"
#include "passes/training/master_weights.h"
#include "passes/training/training_info.h"

namespace amp {

namespace {

using Clock = std::chrono::steady_clock;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A run stops when a step is still skipped with the loss scale at its minimum this many times in a row.
constexpr int64_t kMaxSkipsAtMinimumScale = 3;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The sample order of one epoch: Fisher-Yates over a splitmix64 stream of (seed, epoch), the same
// on every platform and standard library.
std::vector<int64_t> epoch_order(int64_t size, int64_t epoch, uint64_t seed, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle) return order;
  uint64_t state = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch) + 1));
  for (int64_t i = size - 1; i > 0; --i) {
    state = splitmix64(state);
    std::swap(order[static_cast<size_t>(i)], order[state % static_cast<uint64_t>(i + 1)]);
  }
  return order;
}

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

size_t peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;  // kilobytes on Linux
}

// The first data input that is not the labels: where IDX and CSV images go.
std::string feature_key(const TrainingStep& s) {
  for (const std::string& name : s.data_inputs)
    if (name != s.labels) return name;
  return "input";
}

// Everything a run compiles: the step, the eval-mode model for validation, the eval-mode forward
// alone for --save.
struct Models {
  TrainingStep step;
  Model eval;       // forward in eval mode + the same loss, same precision
  Model inference;  // forward in eval mode, fp32, as the user's model
};

Models build_models(const TrainOptions& o) {
  register_amp_op_schemas();
  Model forward = load_model(o.model);
  Models out;
  if (!forward.training_info.empty()) {
    // A step saved by --save-training-graph: the algorithm graph and the inference graph joined
    // again are the step; the inference graph alone, in eval mode, is the model --save writes.
    out.step = step_from_training_info(forward);
    out.inference = clone_model(forward);
    out.inference.training_info.clear();
  } else {
    out.inference = clone_model(forward);
    out.step = build_training_step(std::move(forward), o.spec);
  }
  EvalModePass().run(out.inference);
  out.eval = clone_model(out.inference);
  add_loss(out.eval, out.step.loss_spec);
  RecognizeGeluPass().run(out.eval);  // as the step computes it
  MasterWeightsPass(o.spec.precision).run(out.eval);
  return out;
}

class Trainer {
 public:
  explicit Trainer(const TrainOptions& o) : o_(o), models_(build_models(o)) {
    const TrainingStep& step = models_.step;
    train_data_ = load_data(o.data, feature_key(step), step.labels.empty() ? "labels" : step.labels);
    conform(train_data_, *step.model.graph, step.data_inputs);
    if (!o.val.empty()) {
      val_data_ = load_data(o.val, feature_key(step), step.labels.empty() ? "labels" : step.labels);
      std::vector<std::string> eval_inputs;
      for (const Value* v : models_.eval.graph->inputs())
        if (!v->has_initializer()) eval_inputs.push_back(v->name());
      conform(val_data_, *models_.eval.graph, eval_inputs);
    }
    per_epoch_ = train_data_.size / o.batch_size;
    if (per_epoch_ == 0)
      throw InputError(train_data_.source + ": " + std::to_string(train_data_.size) +
                       " samples do not fill one batch of " + std::to_string(o.batch_size));
    const int64_t epochs = o.epochs > 0 ? o.epochs : 1;
    total_ = o.steps > 0 ? o.steps : std::max<int64_t>(1, epochs * per_epoch_ / o.spec.accumulate);
    schedule_ = o.schedule;
    schedule_.total = total_;

    backend_ = make_backend(o.device);
    uint64_t first_run = 0;
    Checkpoint resumed;
    if (!o.resume.empty()) {
      resumed = read_checkpoint(o.resume);
      first_run = resumed.position.value("backend_runs", uint64_t{0});
    }
    CompileOptions train_options{step.state, step.updates, o.seed, o.threads};
    train_options.first_run = first_run;
    train_options.tf32 = o.tf32;
    train_ = backend_->compile(step.model, train_options);
    std::vector<std::string> eval_state;
    for (const Value* v : models_.eval.graph->initializers())
      if (std::find(step.state.begin(), step.state.end(), v->name()) != step.state.end())
        eval_state.push_back(v->name());
    CompileOptions eval_options{eval_state, {}, o.seed, o.threads};
    eval_options.tf32 = o.tf32;
    eval_ = backend_->compile(models_.eval, eval_options);
    eval_state_ = eval_state;
    if (!o.resume.empty()) resume(resumed);
  }

  TrainResult run();

 private:
  void resume(const Checkpoint& c);
  std::string run_length_text() const;
  void validate(int64_t epoch);
  void checkpoint();
  void save_outputs();
  Feeds batch(int64_t micro);

  const TrainOptions& o_;
  Models models_;
  DataSet train_data_, val_data_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executable> train_, eval_;
  std::vector<std::string> eval_state_;
  LrSchedule schedule_;
  int64_t per_epoch_ = 0, total_ = 0;
  int64_t micro_ = 0, steps_ = 0, skipped_ = 0;
  uint64_t runs_ = 0;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  MetricsLog metrics_;
  TrainResult result_;
  std::unique_ptr<TrainingProgress> progress_;
};

void Trainer::resume(const Checkpoint& c) {
  const auto names = train_->state_names();
  for (const auto& [name, t] : c.state) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw InputError(o_.resume + ": the checkpoint holds '" + name + "', which the training step does not have");
    train_->write_state(name, t);
  }
  if (c.state.size() != names.size())
    throw InputError(o_.resume + ": the checkpoint holds " + std::to_string(c.state.size()) + " state tensors, the step has " +
                     std::to_string(names.size()));
  micro_ = c.position.value("micro_batches", int64_t{0});
  steps_ = c.position.value("optimizer_steps", int64_t{0});
  skipped_ = c.position.value("skipped", int64_t{0});
  runs_ = c.position.value("backend_runs", uint64_t{0});
  if (c.position.value("seed", o_.seed) != o_.seed)
    spdlog::warn("{}: the checkpoint was made with --seed {}, this run uses {}", o_.resume,
                 c.position.value("seed", uint64_t{0}), o_.seed);
}

// Said before the first step, so a run without --epochs or --steps is not a surprise.
std::string Trainer::run_length_text() const {
  const int64_t samples = o_.batch_size * o_.spec.accumulate, size = train_data_.size;
  const std::string length =
      o_.steps > 0 ? fmt::format("--steps {}, {:.2f} epochs of {} samples", o_.steps,
                                 static_cast<double>(o_.steps * samples) / static_cast<double>(size), size)
      : o_.epochs > 0 ? fmt::format("{} epoch{} of {} samples", o_.epochs, o_.epochs == 1 ? "" : "s", size)
                      : fmt::format("1 epoch of {} samples (neither --epochs nor --steps given)", size);
  return fmt::format("training {} steps of {} samples: {}", total_ - steps_, samples, length);
}

Feeds Trainer::batch(int64_t micro) {
  const int64_t epoch = micro / per_epoch_, at = micro % per_epoch_;
  if (epoch != order_epoch_) {
    order_ = epoch_order(train_data_.size, epoch, o_.seed, o_.shuffle);
    order_epoch_ = epoch;
  }
  std::vector<int64_t> rows(order_.begin() + at * o_.batch_size, order_.begin() + (at + 1) * o_.batch_size);
  return gather_rows(train_data_, rows);
}

void Trainer::validate(int64_t epoch) {
  for (const std::string& name : eval_state_) eval_->write_state(name, train_->read_state(name));
  const TrainingStep& step = models_.step;
  const std::string loss_name = models_.eval.graph->outputs().back()->name();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (int64_t start = 0; start < val_data_.size; start += o_.batch_size) {
    std::vector<int64_t> rows;
    for (int64_t i = start; i < std::min(val_data_.size, start + o_.batch_size); ++i) rows.push_back(i);
    Feeds feeds = gather_rows(val_data_, rows);
    std::vector<std::string> fetches{loss_name};
    if (step.classification) fetches.push_back(step.target);
    std::vector<Tensor> out = eval_->run(feeds, fetches);
    loss_sum += as_scalar(out[0]) * static_cast<double>(rows.size());
    if (step.classification)
      for (const auto& [key, t] : feeds)
        if (key == step.labels) correct += correct_predictions(out[1], t);
    seen += static_cast<int64_t>(rows.size());
  }
  result_.val_loss = loss_sum / static_cast<double>(seen);
  nlohmann::json record{{"epoch", epoch}, {"step", steps_}, {"val_loss", result_.val_loss}};
  std::string line = fmt::format("epoch {} step {}: val_loss {:.4f}", epoch, steps_, result_.val_loss);
  if (step.classification) {
    result_.val_accuracy = static_cast<double>(correct) / static_cast<double>(seen);
    record["val_accuracy"] = result_.val_accuracy;
    line += fmt::format(" val_accuracy {:.4f}", result_.val_accuracy);
  }
  metrics_.write(record);
  result_.history.validations.push_back({steps_, result_.val_loss, result_.val_accuracy});
  progress_->note(line);
}

void Trainer::checkpoint() {
  if (o_.checkpoint.empty()) return;
  Checkpoint c;
  for (const std::string& name : train_->state_names()) c.state.emplace_back(name, train_->read_state(name));
  c.position = {{"micro_batches", micro_},  {"optimizer_steps", steps_}, {"skipped", skipped_},
                {"backend_runs", runs_},    {"seed", o_.seed},          {"model", o_.model},
                {"batch_size", o_.batch_size}};
  write_checkpoint(o_.checkpoint, c);
}

void Trainer::save_outputs() {
  if (!o_.save.empty()) {
    Model out = clone_model(models_.inference);
    for (Value* v : out.graph->initializers()) {
      const auto names = train_->state_names();
      if (std::find(names.begin(), names.end(), v->name()) != names.end())
        out.graph->set_initializer(v, train_->read_state(v->name()));
    }
    save_model(out, o_.save);
    progress_->note("trained weights written to " + o_.save);
  }
  if (!o_.save_training_graph.empty()) {
    std::vector<std::pair<std::string, Tensor>> state;
    for (const std::string& name : train_->state_names()) state.emplace_back(name, train_->read_state(name));
    Model saved = to_training_info_model(models_.step, state);
    save_model(saved, o_.save_training_graph);
    progress_->note("training step written to " + o_.save_training_graph);
  }
}

TrainResult Trainer::run() {
  const TrainingStep& step = models_.step;
  if (!o_.metrics.empty()) metrics_ = MetricsLog(o_.metrics, !o_.resume.empty());
  progress_ = std::make_unique<TrainingProgress>(total_, o_.quiet, o_.label);
  progress_->note(run_length_text());
  std::vector<std::string> fetches{step.loss};
  const size_t target_at = step.classification ? fetches.size() : 0;
  if (step.classification) fetches.push_back(step.target);
  const size_t finite_at = step.all_finite.empty() ? 0 : fetches.size();
  if (!step.all_finite.empty()) fetches.push_back(step.all_finite);
  const size_t scale_at = step.loss_scale.empty() ? 0 : fetches.size();
  if (!step.loss_scale.empty()) fetches.push_back(step.loss_scale);

  const int64_t samples_per_step = o_.batch_size * o_.spec.accumulate;
  double timed_seconds = 0, first_seconds = 0;
  int64_t timed_steps = 0, skips_at_minimum = 0;
  const int64_t first_step = steps_;
  while (steps_ < total_) {
    const float lr = static_cast<float>(schedule_.at(steps_));
    double loss_sum = 0, scale = 1;
    int64_t correct = 0;
    bool skipped = false, epoch_ended = false;
    const auto start = Clock::now();
    for (int64_t m = 0; m < o_.spec.accumulate; ++m) {
      Feeds feeds = batch(micro_);
      feeds.emplace_back(step.lr, scalar_tensor(lr));
      if (!step.apply_update.empty()) feeds.emplace_back(step.apply_update, bool_tensor(m == o_.spec.accumulate - 1));
      std::vector<Tensor> out = train_->run(feeds, fetches);
      ++runs_;
      loss_sum += as_scalar(out[0]);
      if (step.classification)
        for (const auto& [key, t] : feeds)
          if (key == step.labels) correct += correct_predictions(out[target_at], t);
      if (finite_at && m == o_.spec.accumulate - 1) skipped = as_scalar(out[finite_at]) == 0;
      if (scale_at) scale = as_scalar(out[scale_at]);
      ++micro_;
      epoch_ended = epoch_ended || micro_ % per_epoch_ == 0;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    ++steps_;
    if (steps_ > first_step + 1) {  // the first step plans the shapes: not a fair sample
      timed_seconds += seconds;
      ++timed_steps;
    } else {
      first_seconds = seconds;
    }
    const double loss = loss_sum / static_cast<double>(o_.spec.accumulate);
    skipped_ += skipped;
    result_.final_loss = loss;
    nlohmann::json record{{"step", steps_}, {"epoch", micro_ / per_epoch_}, {"loss", loss}, {"lr", lr},
                          {"loss_scale", scale}, {"skipped", skipped},
                          {"samples_per_second", static_cast<double>(samples_per_step) / seconds}};
    if (step.classification) record["accuracy"] = static_cast<double>(correct) / static_cast<double>(samples_per_step);
    metrics_.write(record);
    result_.history.steps.push_back({steps_, loss, scale_at ? scale : 0, skipped});
    progress_->step(steps_, loss, static_cast<double>(samples_per_step) / seconds, scale_at ? scale : 0, skipped_);

    if (skipped) {
      const bool at_minimum = step.loss_scale.empty() || scale <= o_.spec.loss_scale.min_scale;
      skips_at_minimum = at_minimum ? skips_at_minimum + 1 : 0;
      if (skips_at_minimum >= kMaxSkipsAtMinimumScale) {
        progress_->finish();
        throw InputError(fmt::format(
            "the loss stays non-finite: {} steps in a row skipped with the loss scale at its minimum ({:g}), "
            "the last at step {}; stopping{}",
            skips_at_minimum, scale, steps_,
            o_.checkpoint.empty() ? "" : " (the last good checkpoint in " + o_.checkpoint + " is kept)"));
      }
    } else {
      skips_at_minimum = 0;
      if (!std::isfinite(loss) && step.all_finite.empty()) {
        progress_->finish();
        throw InputError(fmt::format("the loss is {} at step {}; stopping (lower --lr, or train with --dtype and "
                                     "loss scaling, which skips such steps){}",
                                     loss, steps_,
                                     o_.checkpoint.empty() ? "" : "; the last good checkpoint in " + o_.checkpoint + " is kept"));
      }
    }
    if (epoch_ended) {
      if (!o_.val.empty()) validate(micro_ / per_epoch_);
      checkpoint();
    }
  }
  if (!o_.val.empty() && micro_ % per_epoch_ != 0) validate(micro_ / per_epoch_);
  if (micro_ % per_epoch_ != 0) checkpoint();
  progress_->finish();
  save_outputs();

  result_.steps = steps_ - first_step;
  result_.skipped = skipped_;
  result_.seconds_per_step = timed_steps ? timed_seconds / static_cast<double>(timed_steps) : first_seconds;
  result_.samples_per_second =
      result_.seconds_per_step > 0 ? static_cast<double>(samples_per_step) / result_.seconds_per_step : 0;
  const MemoryStats mem = train_->memory();
  result_.backend_peak_bytes = mem.state_bytes + mem.arena_bytes;
  result_.peak_rss_bytes = peak_rss_bytes();
  return result_;
}

}  // namespace

TrainResult train(const TrainOptions& options) {
  if (options.batch_size <= 0) throw InputError("--batch-size must be positive");
  if (options.epochs < 0 || options.steps < 0) throw InputError("--epochs and --steps must be positive");
  if (options.spec.accumulate <= 0) throw InputError("--accumulate must be positive");
  Trainer t(options);
  return t.run();
}

}  // namespace amp
