#include "frontends/lib/trainer.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <set>

#include "frontends/lib/checkpoint.h"
#include "frontends/lib/data_parallel.h"
#include "frontends/lib/metrics_log.h"
#include "frontends/lib/npz.h"
#include "frontends/lib/training_data.h"
#include "frontends/lib/training_progress.h"
#include "frontends/lib/training_session.h"
#include "graph/error.h"
#include "graph/onnx_io.h"

namespace amp {

namespace {

using Clock = std::chrono::steady_clock;

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

// A loss for a message: NaN without the sign bit the arithmetic happened to leave ("nan", not "-nan").
double shown(double loss) { return std::isnan(loss) ? std::fabs(loss) : loss; }

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

nlohmann::json memory_json(const MemoryReport& r) {
  nlohmann::json j;
  for (const auto& [key, bytes] : r.parts()) j[key] = bytes;
  return j;
}

class Trainer {
 public:
  explicit Trainer(const TrainOptions& o) : o_(o), dp_(o.communicator), session_(session_options(o)), rank_log_(dp_) {
    const TrainingStep& step = session_.step();
    if (!session_.calibration_summary().empty() && !o.quiet)
      spdlog::info("calibration on {}:\n{}", o.calibrate, session_.calibration_summary());
    train_data_ = load_data(o.data, feature_key(step), step.labels.empty() ? "labels" : step.labels);
    conform(train_data_, *step.model.graph, step.data_inputs);
    check_finite(train_data_, o.strict_data, dp_.root());
    if (!o.val.empty()) {
      val_data_ = load_data(o.val, feature_key(step), step.labels.empty() ? "labels" : step.labels);
      conform(val_data_, *session_.eval_model().graph, session_.eval_inputs());
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
    // Before the first collective of the run: ranks started differently would not even agree on
    // which collectives come next (NCCL's or MPI's).
    dp_.check_started_alike(settings());
    // Each replica draws its own dropout masks: with one stream, every rank would drop the same
    // units of its different samples.
    const uint64_t dropout_seed = dp_.rank() == 0 ? o.seed : splitmix64(o.seed ^ splitmix64(static_cast<uint64_t>(dp_.rank())));
    session_.compile(first_run, dropout_seed);
    if (!o.resume.empty()) resume(resumed);
    if (dp_.size() > 1) dp_.check_same_state(session_.state());
  }

  TrainResult run();

 private:
  void resume(const Checkpoint& c);
  std::string run_length_text() const;
  void validate(int64_t epoch);
  void checkpoint();
  void save_outputs();
  Feeds batch(int64_t micro);
  // Micro-batch `micro`, gathered on another thread while the step before it ran, and the gathering
  // of the next one started: the host copies a batch (ResNet-50's at 128 x 224 x 224: 77 MB) while
  // the device or the CPU backend's threads compute, not between two steps. One batch() at a time:
  // the main thread waits for the pending one before anything else reads the epoch's order.
  Feeds take_batch(int64_t micro);
  // What every rank must agree on before training (DataParallel::check_started_alike).
  nlohmann::json settings() const;
  MemoryReport memory_report() const;

  const TrainOptions& o_;
  DataParallel dp_;
  TrainingSession session_;
  RankLog rank_log_;
  DataSet train_data_, val_data_;
  LrSchedule schedule_;
  int64_t per_epoch_ = 0, total_ = 0;
  int64_t micro_ = 0, steps_ = 0, skipped_ = 0;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  std::future<Feeds> next_;  // take_batch's gathering of micro-batch next_micro_
  int64_t next_micro_ = -1;
  MetricsLog metrics_;
  TrainResult result_;
  std::unique_ptr<TrainingProgress> progress_;
};

void Trainer::resume(const Checkpoint& c) {
  session_.restore_state(c.state, o_.resume + ": the checkpoint");
  micro_ = c.position.value("micro_batches", int64_t{0});
  steps_ = c.position.value("optimizer_steps", int64_t{0});
  skipped_ = c.position.value("skipped", int64_t{0});
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

Feeds Trainer::take_batch(int64_t micro) {
  Feeds feeds;
  bool ready = false;
  if (next_.valid()) {
    Feeds pending = next_.get();
    if (next_micro_ == micro) {
      feeds = std::move(pending);
      ready = true;
    }
  }
  if (!ready) feeds = batch(micro);
  next_micro_ = micro + 1;
  // Gathered on another thread while this micro-batch's step runs, and handed to the backend to
  // upload meanwhile (the CUDA backend copies it on a stream of its own).
  next_ = std::async(std::launch::async, [this, m = next_micro_] {
    Feeds f = batch(m);
    session_.prefetch(f);
    return f;
  });
  return feeds;
}

void Trainer::validate(int64_t epoch) {
  session_.begin_evaluation();
  const TrainingStep& step = session_.step();
  EvaluationTotals t;
  const std::vector<int64_t> mine = dp_.validation_rows(val_data_.size);
  for (size_t start = 0; start < mine.size(); start += static_cast<size_t>(o_.batch_size)) {
    const std::vector<int64_t> rows(mine.begin() + static_cast<std::ptrdiff_t>(start),
                                    mine.begin() + static_cast<std::ptrdiff_t>(
                                                       std::min(mine.size(), start + static_cast<size_t>(o_.batch_size))));
    session_.evaluate(gather_rows(val_data_, rows), t);
  }
  std::vector<double> totals{t.loss_sum, static_cast<double>(t.correct), static_cast<double>(t.seen),
                             static_cast<double>(t.non_finite)};
  dp_.sum(totals);
  t.loss_sum = totals[0];
  t.correct = static_cast<int64_t>(totals[1]);
  t.seen = static_cast<int64_t>(totals[2]);
  t.non_finite = static_cast<int64_t>(totals[3]);
  result_.val_loss = t.loss();
  result_.val_non_finite = t.non_finite;
  nlohmann::json record{{"epoch", epoch}, {"step", steps_}, {"val_loss", result_.val_loss}, {"val_non_finite", t.non_finite}};
  std::string line = fmt::format("epoch {} step {}: val_loss {:.4f}", epoch, steps_, shown(result_.val_loss));
  if (step.classification) {
    result_.val_accuracy = t.accuracy();
    record["val_accuracy"] = result_.val_accuracy;
    line += fmt::format(" val_accuracy {:.4f}", result_.val_accuracy);
  }
  if (t.non_finite) line += fmt::format(" ({} of {} samples with NaN or inf outputs)", t.non_finite, t.seen);
  metrics_.write(record);
  result_.history.validations.push_back({steps_, result_.val_loss, result_.val_accuracy});
  progress_->note(line);
  session_.end_evaluation();
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
      {"--no-shuffle", !o_.shuffle}, {"--device", o_.device}, {"the backend (--device)", session_.backend().name()},
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
  session_.trim();  // the copies of the state take the arena's place
  Checkpoint c;
  c.state = session_.state();
  dp_.check_same_state(c.state);
  if (!dp_.root()) return;
  c.position = {{"micro_batches", micro_},  {"optimizer_steps", steps_}, {"skipped", skipped_},
                {"backend_runs", session_.runs()},    {"seed", o_.seed},          {"model", o_.model},
                {"batch_size", o_.batch_size}, {"world_size", dp_.size()}};
  write_checkpoint(o_.checkpoint, c);
}

void Trainer::save_outputs() {
  if (!dp_.root()) return;
  if (!o_.save.empty()) {
    save_model(session_.trained_model(), o_.save);
    progress_->note("trained weights written to " + o_.save);
  }
  if (!o_.save_training_graph.empty()) {
    save_model(session_.training_graph(), o_.save_training_graph);
    progress_->note("training step written to " + o_.save_training_graph);
  }
}

// Where the step's memory goes, from the backend's own figures: its state tensor by tensor, and
// the buffers live in its arena at the arena's peak, each put in one part by what made it.
MemoryReport Trainer::memory_report() const {
  const MemoryStats m = session_.step_memory();
  const TrainingStep& step = session_.step();
  const Graph& g = *step.model.graph;
  // The step's nodes are the forward's, then the loss's, then what the passes append after it:
  // the backward, gradient processing and the optimizer. Values those make are "gradients".
  std::set<const Value*> backward;
  const Value* loss = g.value(step.loss);
  bool after_loss = false;
  for (const Node* n : g.nodes()) {
    if (after_loss)
      for (const Value* out : n->outputs())
        if (out) backward.insert(out);
    after_loss = after_loss || (loss && n == loss->producer());
  }
  const std::set<std::string> state(step.state.begin(), step.state.end());
  MemoryReport r;
  for (const auto& [name, bytes] : m.state)
    (session_.weights().count(name) ? r.weights : r.optimizer_state) += bytes;
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
    r.largest.emplace_back(b.value.empty() ? "kernel scratch" : b.value + " (" + (p ? p->op_type() : "?") + ")", b.bytes);
  }
  std::sort(r.largest.begin(), r.largest.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (r.largest.size() > 12) r.largest.resize(12);
  r.arena = m.arena_bytes;
  r.arena_unused_at_peak = m.arena_bytes - m.peak_bytes;
  r.constants = m.constant_bytes;
  r.validation = session_.eval_bytes();
  r.peak_rss = peak_rss_bytes();
  const size_t accounted = m.state_bytes + m.arena_bytes + r.constants + r.validation;
  r.other = r.peak_rss > accounted ? r.peak_rss - accounted : 0;
  return r;
}

TrainResult Trainer::run() {
  const TrainingStep& step = session_.step();
  if (!o_.metrics.empty() && dp_.root()) metrics_ = MetricsLog(o_.metrics, !o_.resume.empty());
  progress_ = std::make_unique<TrainingProgress>(total_, o_.quiet || !dp_.root(), o_.label);
  if (dp_.root()) progress_->note(run_length_text());
  const bool scaled = !step.loss_scale.empty();

  // Of every process together: the global batch.
  const int64_t samples_per_step = o_.batch_size * o_.spec.accumulate * dp_.size();
  double timed_seconds = 0, first_seconds = 0;
  int64_t timed_steps = 0, skips_at_minimum = 0, skips_in_a_row = 0, notes_of_skips = 0;
  const int64_t first_step = steps_;
  while (steps_ < total_) {
    const float lr = static_cast<float>(schedule_.at(steps_));
    bool epoch_ended = false;
    const auto start = Clock::now();
    const StepOutcome outcome = session_.run_step(
        [&](int64_t) {
          Feeds feeds = take_batch(micro_);
          ++micro_;
          epoch_ended = epoch_ended || micro_ % per_epoch_ == 0;
          return feeds;
        },
        lr);
    const bool skipped = outcome.skipped;
    const double scale = scaled ? outcome.loss_scale : 1;
    int64_t correct = outcome.correct;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    ++steps_;
    if (steps_ > first_step + 1) {  // the first step plans the shapes: not a fair sample
      timed_seconds += seconds;
      ++timed_steps;
    } else {
      first_seconds = seconds;
    }
    const double local_loss = outcome.loss;
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
    // What of the step's wall time the device worked (the rest is the host's), where measured.
    if (outcome.device_ms >= 0) record["device_ms"] = outcome.device_ms;
    metrics_.write(record);
    result_.history.steps.push_back({steps_, loss, scaled ? scale : 0, skipped});
    progress_->step(steps_, shown(loss), static_cast<double>(samples_per_step) / seconds, scaled ? scale : 0, skipped_);

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
  if (next_.valid()) next_.wait();  // the micro-batch after the last one, gathered for nothing
  if (!o_.val.empty() && micro_ % per_epoch_ != 0) validate(micro_ / per_epoch_);
  if (micro_ % per_epoch_ != 0) checkpoint();
  progress_->finish();
  // The plans' arenas go before the state is copied out for the checks and files below.
  session_.trim();
  if (dp_.size() > 1 || rank_log_.active()) {
    const auto final_state = session_.state();
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
  result_.backend_peak_bytes = session_.step_memory().state_bytes + session_.step_memory().arena_bytes;
  result_.peak_rss_bytes = peak_rss_bytes();
  result_.memory = memory_report();
  if (o_.memory_report) metrics_.write({{"memory", memory_json(result_.memory)}});
  result_.root = dp_.root();
  return result_;
}

}  // namespace

SessionOptions session_options(const TrainOptions& o) {
  SessionOptions s;
  s.model.path = o.model;
  s.spec = o.spec;
  s.device = o.device;
  s.seed = o.seed;
  s.threads = o.threads;
  s.tf32 = o.tf32;
  s.with_eval = !o.val.empty();
  s.communicator = o.communicator;
  if (!o.calibrate.empty()) {
    s.calibration_feeds = read_npz(o.calibrate);
    s.calibration_source = o.calibrate;
    s.calibration_max_error = o.calibrate_max_error;
  }
  return s;
}

TrainResult train(const TrainOptions& options) {
  if (options.batch_size <= 0) throw InputError("--batch-size must be positive");
  if (options.epochs < 0 || options.steps < 0) throw InputError("--epochs and --steps must be positive");
  if (options.spec.accumulate <= 0) throw InputError("--accumulate must be positive");
  Trainer t(options);
  return t.run();
}

}  // namespace amp
