#include "frontends/lib/trainer.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <set>

#include "backends/backend.h"
#include "frontends/lib/checkpoint.h"
#include "frontends/lib/data_parallel.h"
#include "frontends/lib/metrics_log.h"
#include "frontends/lib/non_finite.h"
#include "frontends/lib/training_data.h"
#include "frontends/lib/training_progress.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/fusion/recognize_attention.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "passes/training/eval_mode.h"
#include "passes/training/master_weights.h"
#include "passes/training/training_info.h"

namespace amp {

namespace {

using Clock = std::chrono::steady_clock;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A run stops when a step is still skipped with the loss scale at its minimum this many times in a row.
constexpr int64_t kMaxSkipsAtMinimumScale = 3;
// Skipped steps noted by a line of their own (the progress line counts all of them).
constexpr int64_t kNotedSkips = 5;

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

// A loss for a message: NaN without the sign bit the arithmetic happened to leave ("nan", not "-nan").
double shown(double loss) { return std::isnan(loss) ? std::fabs(loss) : loss; }

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

// Everything a run compiles: the step, and with --val the eval-mode model for validation. The
// model --save writes is made at the end from the file and the trained state (inference_model),
// so no copy of the weights outlives compilation.
struct Models {
  TrainingStep step;
  Model eval;  // forward in eval mode + the same loss, same precision (with --val; else empty)
  std::set<std::string> weights;  // initializers of the model as given: its weights, not the optimizer's state
};

// The forward in eval mode, fp32, as the user's model: what --save writes (with the trained state)
// and what validation's model is made from. Read from the file again: its external data is mapped,
// not copied, so this costs no memory for weights until they are replaced.
Model inference_model(const std::string& path) {
  Model m = load_model(path);
  m.training_info.clear();
  EvalModePass().run(m);
  return m;
}

Models build_models(const TrainOptions& o) {
  register_amp_op_schemas();
  Model forward = load_model(o.model);
  Models out;
  for (const Value* v : forward.graph->initializers()) out.weights.insert(v->name());
  if (!forward.training_info.empty()) {
    // A step saved by --save-training-graph: the algorithm graph and the inference graph joined
    // again are the step; the inference graph alone, in eval mode, is the model --save writes.
    out.step = step_from_training_info(forward);
    out.weights.clear();
    for (const std::string& name : out.step.params) out.weights.insert(name);
  } else {
    TrainingSpec spec = o.spec;
    spec.data_parallel.enabled = o.communicator != nullptr;
    // In every dtype: a NaN from the data or an fp32 overflow skips its step as an fp16 overflow
    // does, instead of writing NaN into every weight.
    spec.check_finite = true;
    // Errors about one node (an op without a gradient rule) name the file too, as amp-run's do.
    try {
      out.step = build_training_step(std::move(forward), spec);
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind(o.model, 0) == 0) throw;
      throw InputError(o.model + ": " + what);
    }
  }
  const Graph& g = *out.step.model.graph;
  bool averages = false;
  for (const Node* n : g.nodes()) averages = averages || (n->domain() == kAmpDomain && n->op_type() == "AllReduce");
  if (o.communicator && !averages)
    throw InputError(o.model + ": this training step was saved by a single process: it has no AllReduce to average "
                     "the processes' gradients with; train from the model itself, or save the step from a "
                     "data-parallel run");
  if (!o.val.empty()) {
    out.eval = inference_model(o.model);
    add_loss(out.eval, out.step.loss_spec);
    RecognizeGeluPass().run(out.eval);  // as the step computes it
    RecognizeLayerNormPass().run(out.eval);
    RecognizeAttentionPass().run(out.eval);
    MasterWeightsPass(o.spec.precision).run(out.eval);
  }
  return out;
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

nlohmann::json memory_json(const MemoryReport& r) {
  nlohmann::json j;
  for (const auto& [key, bytes] : r.parts()) j[key] = bytes;
  return j;
}

class Trainer {
 public:
  explicit Trainer(const TrainOptions& o) : o_(o), dp_(o.communicator), models_(build_models(o)), rank_log_(dp_) {
    const TrainingStep& step = models_.step;
    train_data_ = load_data(o.data, feature_key(step), step.labels.empty() ? "labels" : step.labels);
    conform(train_data_, *step.model.graph, step.data_inputs);
    check_finite(train_data_, o.strict_data, dp_.root());
    if (!o.val.empty()) {
      val_data_ = load_data(o.val, feature_key(step), step.labels.empty() ? "labels" : step.labels);
      std::vector<std::string> eval_inputs;
      for (const Value* v : models_.eval.graph->inputs())
        if (!v->has_initializer()) eval_inputs.push_back(v->name());
      conform(val_data_, *models_.eval.graph, eval_inputs);
      check_finite(val_data_, o.strict_data, dp_.root());
    }
    per_epoch_ = dp_.shard_size(train_data_.size) / o.batch_size;
    if (per_epoch_ == 0)
      throw InputError(train_data_.source + ": " + std::to_string(train_data_.size) + " samples do not fill one batch of " +
                       std::to_string(o.batch_size) +
                       (dp_.size() > 1 ? " in each of " + std::to_string(dp_.size()) + " processes" : std::string()));
    const int64_t epochs = o.epochs > 0 ? o.epochs : 1;
    total_ = o.steps > 0 ? o.steps : std::max<int64_t>(1, epochs * per_epoch_ / o.spec.accumulate);
    schedule_ = o.schedule;
    schedule_.total = total_;

    uint64_t first_run = 0;
    Checkpoint resumed;
    if (!o.resume.empty()) {
      resumed = read_checkpoint(o.resume);
      first_run = resumed.position.value("backend_runs", uint64_t{0});
    }
    backend_ = make_backend(o.device);
    // Before the first collective of the run: ranks started differently would not even agree on
    // which collectives come next (NCCL's or MPI's).
    dp_.check_started_alike(settings());
    // Each replica draws its own dropout masks: with one stream, every rank would drop the same
    // units of its different samples.
    const uint64_t dropout_seed = dp_.rank() == 0 ? o.seed : splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(dp_.rank())));
    CompileOptions train_options{step.state, step.updates, dropout_seed, o.threads};
    train_options.first_run = first_run;
    train_options.tf32 = o.tf32;
    train_options.communicator = o.communicator;
    train_ = backend_->compile(step.model, train_options);
    // The backend holds the state now: the step's copy (and with it the mapping of the model's
    // external data) goes. --save-training-graph puts the trained state back at the end.
    release_initializers(models_.step.model, step.state);
    own_external_initializers(models_.step.model);
    if (!o.val.empty()) {
      std::vector<std::string> eval_state;
      for (const Value* v : models_.eval.graph->initializers())
        if (std::find(step.state.begin(), step.state.end(), v->name()) != step.state.end())
          eval_state.push_back(v->name());
      CompileOptions eval_options{eval_state, {}, o.seed, o.threads};
      eval_options.tf32 = o.tf32;
      eval_ = backend_->compile(models_.eval, eval_options);
      release_initializers(models_.eval, eval_state);
      own_external_initializers(models_.eval);
      eval_state_ = eval_state;
    }
    if (!o.resume.empty()) resume(resumed);
    if (dp_.size() > 1) dp_.check_same_state(state());
  }

  TrainResult run();

 private:
  void resume(const Checkpoint& c);
  std::string run_length_text() const;
  void validate(int64_t epoch);
  void checkpoint();
  void save_outputs();
  Feeds batch(int64_t micro);
  // What every rank must agree on before training (DataParallel::check_started_alike).
  nlohmann::json settings() const;
  std::vector<std::pair<std::string, Tensor>> state() const;
  MemoryReport memory_report() const;

  const TrainOptions& o_;
  DataParallel dp_;
  Models models_;
  RankLog rank_log_;
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
  MemoryStats step_memory_;  // the training step's, as its latest run planned it
  size_t eval_bytes_ = 0;    // validation's executable at its largest: state + arena + constants
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
  const int64_t saved_world = c.position.value("world_size", int64_t{1});
  if (saved_world != dp_.size()) {
    // An epoch's end means the same position at any number of processes; inside an epoch, which
    // samples are left depends on how they were sharded.
    const int64_t saved_batch = c.position.value("batch_size", o_.batch_size);
    const int64_t saved_per_epoch = (train_data_.size + saved_world - 1) / saved_world / std::max<int64_t>(saved_batch, 1);
    if (saved_per_epoch == 0 || micro_ % saved_per_epoch != 0)
      throw InputError(o_.resume + ": the checkpoint was written by " + std::to_string(saved_world) +
                       " processes inside an epoch; resume it with as many (mpirun -np " + std::to_string(saved_world) +
                       "), or from a checkpoint written at the end of an epoch");
    micro_ = micro_ / saved_per_epoch * per_epoch_;
    // --epochs counts the epochs left at this number of processes, not the steps of the other.
    if (o_.epochs > 0) {
      total_ = steps_ + std::max<int64_t>(0, o_.epochs * per_epoch_ - micro_) / o_.spec.accumulate;
      schedule_.total = total_;
    }
  }
  if (c.position.value("seed", o_.seed) != o_.seed)
    spdlog::warn("{}: the checkpoint was made with --seed {}, this run uses {}", o_.resume,
                 c.position.value("seed", uint64_t{0}), o_.seed);
}

// Said before the first step, so a run without --epochs or --steps is not a surprise.
std::string Trainer::run_length_text() const {
  const int64_t samples = o_.batch_size * o_.spec.accumulate * dp_.size(), size = train_data_.size;
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
    order_ = dp_.shard(epoch_order(train_data_.size, epoch, o_.seed, o_.shuffle));
    order_epoch_ = epoch;
  }
  std::vector<int64_t> rows(order_.begin() + at * o_.batch_size, order_.begin() + (at + 1) * o_.batch_size);
  return gather_rows(train_data_, rows);
}

void Trainer::validate(int64_t epoch) {
  // One arena at a time: the step plans again after validation.
  train_->trim();
  for (const std::string& name : eval_state_) eval_->write_state(name, train_->read_state(name));
  const TrainingStep& step = models_.step;
  const std::string loss_name = models_.eval.graph->outputs().back()->name();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0, non_finite = 0;
  const std::vector<int64_t> mine = dp_.validation_rows(val_data_.size);
  for (size_t start = 0; start < mine.size(); start += static_cast<size_t>(o_.batch_size)) {
    const std::vector<int64_t> rows(mine.begin() + static_cast<std::ptrdiff_t>(start),
                                    mine.begin() + static_cast<std::ptrdiff_t>(
                                                       std::min(mine.size(), start + static_cast<size_t>(o_.batch_size))));
    Feeds feeds = gather_rows(val_data_, rows);
    std::vector<std::string> fetches{loss_name};
    if (!step.target.empty()) fetches.push_back(step.target);
    std::vector<Tensor> out = eval_->run(feeds, fetches);
    loss_sum += as_scalar(out[0]) * static_cast<double>(rows.size());
    if (step.classification)
      for (const auto& [key, t] : feeds)
        if (key == step.labels) correct += correct_predictions(out[1], t);
    // Samples whose outputs hold a NaN or inf: counted, since the mean loss alone would only be NaN.
    if (!step.target.empty()) non_finite += count_non_finite(out[1]).samples;
    seen += static_cast<int64_t>(rows.size());
  }
  std::vector<double> totals{loss_sum, static_cast<double>(correct), static_cast<double>(seen),
                             static_cast<double>(non_finite)};
  dp_.sum(totals);
  loss_sum = totals[0];
  correct = static_cast<int64_t>(totals[1]);
  seen = static_cast<int64_t>(totals[2]);
  non_finite = static_cast<int64_t>(totals[3]);
  result_.val_loss = loss_sum / static_cast<double>(seen);
  result_.val_non_finite = non_finite;
  nlohmann::json record{{"epoch", epoch}, {"step", steps_}, {"val_loss", result_.val_loss}, {"val_non_finite", non_finite}};
  std::string line = fmt::format("epoch {} step {}: val_loss {:.4f}", epoch, steps_, shown(result_.val_loss));
  if (step.classification) {
    result_.val_accuracy = static_cast<double>(correct) / static_cast<double>(seen);
    record["val_accuracy"] = result_.val_accuracy;
    line += fmt::format(" val_accuracy {:.4f}", result_.val_accuracy);
  }
  if (non_finite) line += fmt::format(" ({} of {} samples with NaN or inf outputs)", non_finite, seen);
  metrics_.write(record);
  result_.history.validations.push_back({steps_, result_.val_loss, result_.val_accuracy});
  progress_->note(line);
  const MemoryStats m = eval_->memory();
  eval_bytes_ = std::max(eval_bytes_, m.state_bytes + m.arena_bytes + m.constant_bytes);
  eval_->trim();
}

std::vector<std::pair<std::string, Tensor>> Trainer::state() const {
  std::vector<std::pair<std::string, Tensor>> all;
  for (const std::string& name : train_->state_names()) all.emplace_back(name, train_->read_state(name));
  return all;
}

nlohmann::json Trainer::settings() const {
  const TrainingSpec& s = o_.spec;
  auto data_digest = [](const DataSet& d) {
    uint64_t h = static_cast<uint64_t>(d.size);
    for (const auto& [key, t] : d.arrays) h = h * 1000003 ^ digest(key.data(), key.size()) ^ digest(t.data(), t.nbytes());
    return std::to_string(h);
  };
  nlohmann::json j = {
      {"model (digest of the file)", std::to_string(file_digest(o_.model))},
      {"--data (digest of the arrays)", data_digest(train_data_)},
      {"--val (digest of the arrays)", o_.val.empty() ? std::string() : data_digest(val_data_)},
      {"--resume (digest of the checkpoint)",
       o_.resume.empty() ? std::string() : std::to_string(file_digest(o_.resume + "/checkpoint.npz"))},
      {"--epochs", o_.epochs}, {"--steps", o_.steps}, {"--batch-size", o_.batch_size}, {"--seed", o_.seed},
      {"--no-shuffle", !o_.shuffle}, {"--device", o_.device}, {"the backend (--device)", backend_->name()},
      {"--tf32", o_.tf32},
      {"--loss", s.loss.kind ? loss_kind_name(*s.loss.kind) : ""}, {"--target", s.loss.target},
      {"--labels", s.loss.labels}, {"--optimizer", optimizer_kind_name(s.optimizer.kind)},
      {"--momentum", s.optimizer.momentum}, {"--nesterov", s.optimizer.nesterov},
      {"--weight-decay", s.optimizer.weight_decay}, {"--clip-norm", s.clip_norm}, {"--accumulate", s.accumulate},
      {"--dtype", dtype_name(s.precision)}, {"--loss-scale", static_cast<int>(s.loss_scale.mode)},
      {"--loss-scale (initial)", s.loss_scale.initial}, {"--freeze", s.freeze},
      {"--bucket-mb", s.data_parallel.bucket_bytes}, {"--lr", o_.schedule.base},
      {"--schedule", static_cast<int>(o_.schedule.kind)}, {"--warmup", o_.schedule.warmup}};
  return j;
}

void Trainer::checkpoint() {
  if (o_.checkpoint.empty()) return;
  train_->trim();  // the copies of the state take the arena's place
  Checkpoint c;
  c.state = state();
  dp_.check_same_state(c.state);
  if (!dp_.root()) return;
  c.position = {{"micro_batches", micro_},  {"optimizer_steps", steps_}, {"skipped", skipped_},
                {"backend_runs", runs_},    {"seed", o_.seed},          {"model", o_.model},
                {"batch_size", o_.batch_size}, {"world_size", dp_.size()}};
  write_checkpoint(o_.checkpoint, c);
}

void Trainer::save_outputs() {
  if (!dp_.root()) return;
  if (!o_.save.empty()) {
    Model out = inference_model(o_.model);
    const auto names = train_->state_names();
    for (Value* v : out.graph->initializers())
      if (std::find(names.begin(), names.end(), v->name()) != names.end())
        out.graph->set_initializer(v, train_->read_state(v->name()));
    save_model(out, o_.save);
    progress_->note("trained weights written to " + o_.save);
  }
  if (!o_.save_training_graph.empty()) {
    // The step's initializers were released after compiling: the trained state takes their place.
    Graph& g = *models_.step.model.graph;
    for (const std::string& name : train_->state_names())
      if (Value* v = g.value(name); v && v->has_initializer()) g.set_initializer(v, train_->read_state(name));
    Model saved = to_training_info_model(models_.step, {});
    release_initializers(models_.step.model, models_.step.state);
    save_model(saved, o_.save_training_graph);
    progress_->note("training step written to " + o_.save_training_graph);
  }
}

// Where the step's memory goes, from the backend's own figures: its state tensor by tensor, and
// the buffers live in its arena at the arena's peak, each put in one part by what made it.
MemoryReport Trainer::memory_report() const {
  const MemoryStats& m = step_memory_;
  const Graph& g = *models_.step.model.graph;
  // The step's nodes are the forward's, then the loss's, then what the passes append after it:
  // the backward, gradient processing and the optimizer. Values those make are "gradients".
  std::set<const Value*> backward;
  const Value* loss = g.value(models_.step.loss);
  bool after_loss = false;
  for (const Node* n : g.nodes()) {
    if (after_loss)
      for (const Value* out : n->outputs())
        if (out) backward.insert(out);
    after_loss = after_loss || (loss && n == loss->producer());
  }
  const std::set<std::string> state(models_.step.state.begin(), models_.step.state.end());
  MemoryReport r;
  for (const auto& [name, bytes] : m.state)
    (models_.weights.count(name) ? r.weights : r.optimizer_state) += bytes;
  for (const ArenaUse& b : m.peak_live) {
    const Value* v = b.value.empty() ? nullptr : g.value(b.value);
    const Node* p = v ? v->producer() : nullptr;
    if (b.value.empty())
      r.scratch += b.bytes;
    else if (p && p->op_type() == "Cast" && p->domain().empty() && !p->inputs().empty() && p->input(0) &&
             state.count(p->input(0)->name()) && !backward.count(v))
      r.low_precision_weights += b.bytes;
    else if (backward.count(v))
      r.gradients += b.bytes;
    else
      r.activations += b.bytes;
  }
  r.arena = m.arena_bytes;
  r.arena_unused_at_peak = m.arena_bytes - m.peak_bytes;
  r.constants = m.constant_bytes;
  r.validation = eval_bytes_;
  r.peak_rss = peak_rss_bytes();
  const size_t accounted = m.state_bytes + m.arena_bytes + r.constants + r.validation;
  r.other = r.peak_rss > accounted ? r.peak_rss - accounted : 0;
  return r;
}

TrainResult Trainer::run() {
  const TrainingStep& step = models_.step;
  if (!o_.metrics.empty() && dp_.root()) metrics_ = MetricsLog(o_.metrics, !o_.resume.empty());
  progress_ = std::make_unique<TrainingProgress>(total_, o_.quiet || !dp_.root(), o_.label);
  if (dp_.root()) progress_->note(run_length_text());
  std::vector<std::string> fetches{step.loss};
  const size_t target_at = step.classification ? fetches.size() : 0;
  if (step.classification) fetches.push_back(step.target);
  const size_t finite_at = step.all_finite.empty() ? 0 : fetches.size();
  if (!step.all_finite.empty()) fetches.push_back(step.all_finite);
  const size_t scale_at = step.loss_scale.empty() ? 0 : fetches.size();
  if (!step.loss_scale.empty()) fetches.push_back(step.loss_scale);

  // Of every process together: the global batch.
  const int64_t samples_per_step = o_.batch_size * o_.spec.accumulate * dp_.size();
  double timed_seconds = 0, first_seconds = 0;
  int64_t timed_steps = 0, skips_at_minimum = 0, skips_in_a_row = 0, notes_of_skips = 0;
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
      step_memory_ = train_->memory();
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
    const double local_loss = loss_sum / static_cast<double>(o_.spec.accumulate);
    // The global batch's loss and accuracy; the skip decision is the same everywhere by
    // construction (the check reads averaged gradients), and summed as a guard.
    std::vector<double> totals{local_loss, static_cast<double>(correct), skipped ? 1.0 : 0.0};
    dp_.sum(totals);
    const double loss = totals[0] / dp_.size();
    correct = static_cast<int64_t>(totals[1]);
    if (totals[2] != 0 && totals[2] != dp_.size())
      throw Error(fmt::format("the processes disagree on skipping step {}: {} of {} skip it", steps_, totals[2], dp_.size()));
    rank_log_.step({{"step", steps_}, {"loss", local_loss}, {"global_loss", loss}, {"loss_scale", scale}, {"skipped", skipped}});
    skipped_ += skipped;
    result_.final_loss = loss;
    nlohmann::json record{{"step", steps_}, {"epoch", micro_ / per_epoch_}, {"loss", loss}, {"lr", lr},
                          {"loss_scale", scale}, {"skipped", skipped},
                          {"samples_per_second", static_cast<double>(samples_per_step) / seconds}};
    if (step.classification) record["accuracy"] = static_cast<double>(correct) / static_cast<double>(samples_per_step);
    metrics_.write(record);
    result_.history.steps.push_back({steps_, loss, scale_at ? scale : 0, skipped});
    progress_->step(steps_, shown(loss), static_cast<double>(samples_per_step) / seconds, scale_at ? scale : 0, skipped_);

    if (skipped) {
      ++skips_in_a_row;
      // Without a loss scale to lower, or with a NaN loss, a skip is the data's or the model's
      // doing, not the scale finding its level: say so (the first few times).
      if ((step.loss_scale.empty() || !std::isfinite(loss)) && notes_of_skips++ < kNotedSkips)
        progress_->note(fmt::format("step {} skipped: {} (loss {}); nothing was applied", steps_,
                                    std::isfinite(loss) ? "non-finite gradients" : "non-finite loss", shown(loss)));
      if (o_.max_skipped_steps > 0 && skips_in_a_row >= o_.max_skipped_steps) {
        progress_->finish();
        throw CollectiveError(fmt::format(
            "{} steps in a row skipped for non-finite gradients (--max-skipped-steps {}), the last at step {} with "
            "loss {}; stopping{}",
            skips_in_a_row, o_.max_skipped_steps, steps_, shown(loss),
            o_.checkpoint.empty() ? "" : " (the last good checkpoint in " + o_.checkpoint + " is kept)"));
      }
      const bool at_minimum = !step.loss_scale.empty() && scale <= o_.spec.loss_scale.min_scale;
      skips_at_minimum = at_minimum ? skips_at_minimum + 1 : 0;
      if (skips_at_minimum >= kMaxSkipsAtMinimumScale) {
        progress_->finish();
        throw CollectiveError(fmt::format(
            "the loss stays non-finite: {} steps in a row skipped with the loss scale at its minimum ({:g}), "
            "the last at step {}; stopping{}",
            skips_at_minimum, scale, steps_,
            o_.checkpoint.empty() ? "" : " (the last good checkpoint in " + o_.checkpoint + " is kept)"));
      }
    } else {
      skips_at_minimum = skips_in_a_row = 0;
      if (!std::isfinite(loss) && step.all_finite.empty()) {
        progress_->finish();
        throw CollectiveError(fmt::format("the loss is {} at step {}; stopping (lower --lr, or train with --dtype and "
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
  // The plans' arenas go before the state is copied out for the checks and files below.
  train_->trim();
  if (dp_.size() > 1 || rank_log_.active()) {
    const auto final_state = state();
    dp_.check_same_state(final_state);
    rank_log_.state(final_state);
  }
  save_outputs();

  result_.steps = steps_ - first_step;
  result_.skipped = skipped_;
  result_.seconds_per_step = timed_steps ? timed_seconds / static_cast<double>(timed_steps) : first_seconds;
  result_.first_step_seconds = first_seconds;
  result_.samples_per_second =
      result_.seconds_per_step > 0 ? static_cast<double>(samples_per_step) / result_.seconds_per_step : 0;
  result_.backend_peak_bytes = step_memory_.state_bytes + step_memory_.arena_bytes;
  result_.peak_rss_bytes = peak_rss_bytes();
  result_.memory = memory_report();
  if (o_.memory_report) metrics_.write({{"memory", memory_json(result_.memory)}});
  result_.root = dp_.root();
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
