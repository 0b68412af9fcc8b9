// onnx_amp.Trainer: amp-train's training session (frontends/lib/training_session.h) stepped from
// Python, one batch of numpy arrays at a time, with amp-train's reading of its settings
// (frontends/lib/train_flags.h), its data checks (conform), its evaluation and its plot.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>

#include "frontends/lib/svg_chart.h"
#include "frontends/lib/train_flags.h"
#include "frontends/lib/training_data.h"
#include "frontends/lib/training_plot.h"
#include "frontends/python/bindings.h"
#include "frontends/python/numpy_tensor.h"
#include "graph/error.h"
#include "graph/onnx_io.h"

namespace amp::python {

namespace {

using Clock = std::chrono::steady_clock;

class Trainer {
 public:
  Trainer(const ModelSource& source, const TrainFlags& flags, TrainOptions o, int64_t total_steps, bool evaluation) {
    o.model = source.path;
    o = apply_train_flags(std::move(o), flags);
    if (o.schedule.kind != LrSchedule::Kind::kConstant && total_steps <= 0)
      throw InputError("schedule='" + flags.schedule + "' needs total_steps (the steps it decays over)");
    schedule_ = o.schedule;
    schedule_.total = std::max<int64_t>(total_steps, 1);
    options_ = session_options(o);
    options_.model = source;
    options_.with_eval = evaluation;
    start(0);
  }

  double step(const py::dict& batch, std::optional<double> lr) {
    DataSet data = data_set(batch, "batch");
    const float rate = static_cast<float>(lr.value_or(schedule_.at(steps_)));
    StepOutcome out;
    double seconds = 0;
    {
      py::gil_scoped_release release;
      conform(data, *session_->step().model.graph, session_->step().data_inputs);
      const auto begin = Clock::now();
      out = session_->run_step([&](int64_t) { return std::move(data.arrays); }, rate);
      seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    }
    ++steps_;
    // The first step plans the shapes: not a fair sample of the time per step.
    if (steps_ == 1) {
      result_.first_step_seconds = seconds;
    } else {
      timed_seconds_ += seconds;
      ++timed_steps_;
    }
    skipped_ += out.skipped;
    last_ = out;
    result_.history.steps.push_back({steps_, out.loss, out.loss_scale, out.skipped});
    return out.loss;
  }

  py::dict evaluate(const py::object& batches) {
    if (!session_->has_evaluation()) throw InputError("this Trainer was made with evaluation=False");
    std::vector<py::object> list;
    if (py::isinstance<py::dict>(batches))
      list.push_back(batches);
    else
      for (const py::handle b : batches) list.push_back(py::reinterpret_borrow<py::object>(b));
    EvaluationTotals totals;
    {
      py::gil_scoped_release release;
      session_->begin_evaluation();
    }
    for (size_t i = 0; i < list.size(); ++i) {
      check_signals();
      if (!py::isinstance<py::dict>(list[i])) throw InputError("evaluate: batch " + std::to_string(i) + " is not a dict of arrays");
      DataSet data = data_set(list[i].cast<py::dict>(), "batch " + std::to_string(i));
      py::gil_scoped_release release;
      conform(data, *session_->eval_model().graph, session_->eval_inputs());
      session_->evaluate(std::move(data.arrays), totals);
    }
    {
      py::gil_scoped_release release;
      session_->end_evaluation();
    }
    const bool classification = session_->step().classification;
    result_.val_loss = totals.loss();
    result_.val_accuracy = classification ? totals.accuracy() : -1;
    result_.val_non_finite = totals.non_finite;
    result_.history.validations.push_back({steps_, result_.val_loss, result_.val_accuracy});
    py::dict out;
    out["loss"] = totals.loss();
    out["accuracy"] = classification ? py::object(py::float_(totals.accuracy())) : py::object(py::none());
    out["samples"] = totals.seen;
    out["non_finite_samples"] = totals.non_finite;
    return out;
  }

  py::dict state_dict() const {
    std::vector<std::pair<std::string, Tensor>> state;
    {
      py::gil_scoped_release release;
      state = session_->state();
    }
    py::dict out;
    out["state"] = dict_from_tensors(std::move(state));
    out["steps"] = steps_;
    out["skipped_steps"] = skipped_;
    out["backend_runs"] = session_->runs();
    return out;
  }

  void load_state_dict(const py::dict& d) {
    for (const char* key : {"state", "steps", "skipped_steps", "backend_runs"})
      if (!d.contains(key)) throw InputError(std::string("load_state_dict: no '") + key + "' (a state_dict() has it)");
    const uint64_t runs = d["backend_runs"].cast<uint64_t>();
    // Random ops (Dropout) continue their stream from the run the state was saved at: the step is
    // compiled again to start there.
    if (runs != session_->runs()) start(runs);
    std::vector<std::pair<std::string, Tensor>> state;
    const auto names = session_->state_names();
    for (const auto& [key, value] : d["state"].cast<py::dict>()) {
      const std::string name = py::str(key);
      DType wanted = DType::kUndefined;
      if (std::find(names.begin(), names.end(), name) != names.end()) wanted = session_->read_state(name).dtype;
      state.emplace_back(name, tensor_from_numpy(value, "state['" + name + "']",
                                                 wanted == DType::kBFloat16 ? wanted : DType::kUndefined));
    }
    {
      py::gil_scoped_release release;
      session_->restore_state(state, "the state_dict");
    }
    steps_ = d["steps"].cast<int64_t>();
    skipped_ = d["skipped_steps"].cast<int64_t>();
  }

  void export_model(const std::string& path, bool training_graph) {
    py::gil_scoped_release release;
    save_model(training_graph ? session_->training_graph() : session_->trained_model(), path);
  }

  void plot(const std::string& path, const std::string& title, const std::string& label) {
    TrainResult r = result();
    py::gil_scoped_release release;
    write_chart_svg(training_chart(title, {{label, r}}), path);
  }

  TrainResult result() const {
    TrainResult r = result_;
    r.steps = steps_;
    r.skipped = skipped_;
    r.final_loss = last_.loss;
    r.seconds_per_step = timed_steps_ ? timed_seconds_ / static_cast<double>(timed_steps_) : r.first_step_seconds;
    const MemoryStats m = session_->step_memory();
    r.backend_peak_bytes = m.state_bytes + m.arena_bytes;
    return r;
  }

  py::list history() const {
    py::list out;
    for (const auto& s : result_.history.steps) {
      py::dict d;
      d["step"] = s.step;
      d["loss"] = s.loss;
      d["loss_scale"] = session_->step().loss_scale.empty() ? py::object(py::none()) : py::object(py::float_(s.loss_scale));
      d["skipped"] = s.skipped;
      out.append(d);
    }
    return out;
  }

  int64_t steps() const { return steps_; }
  int64_t skipped_steps() const { return skipped_; }
  bool last_step_skipped() const { return last_.skipped; }
  py::object loss_scale() const {
    const std::string& name = session_->step().loss_scale;
    if (name.empty()) return py::none();
    return py::float_(session_->read_state(name).element(0));
  }
  double next_lr() const { return schedule_.at(steps_); }
  std::vector<std::string> state_names() const { return session_->state_names(); }
  std::string device() const { return session_->backend().name(); }

 private:
  void start(uint64_t first_run) {
    py::gil_scoped_release release;
    session_.reset();
    session_ = std::make_unique<TrainingSession>(options_);
    session_->compile(first_run, options_.seed);
  }

  DataSet data_set(const py::dict& batch, const std::string& what) const {
    DataSet d;
    d.source = what;
    d.arrays = tensors_from_dict(batch, what);
    if (d.arrays.empty()) throw InputError(what + ": no arrays");
    for (const auto& [name, t] : d.arrays)
      if (t.dims.empty()) throw InputError(what + "['" + name + "']: a scalar; a batch's arrays have a sample axis first");
    d.size = d.arrays.front().second.dims[0];
    return d;
  }

  SessionOptions options_;
  LrSchedule schedule_;
  std::unique_ptr<TrainingSession> session_;
  int64_t steps_ = 0, skipped_ = 0, timed_steps_ = 0;
  double timed_seconds_ = 0;
  StepOutcome last_;
  TrainResult result_;
};

}  // namespace

void bind_trainer(py::module_& m) {
  py::class_<Trainer>(m, "Trainer")
      .def(py::init([](const py::object& model, const std::string& name, const std::string& base_dir,
                       const std::string& loss, const std::string& target, const std::string& labels,
                       const std::string& optimizer, double lr, double momentum, bool nesterov, double weight_decay,
                       double clip_norm, const std::string& dtype, const std::string& loss_scale,
                       const std::string& schedule, int64_t warmup, int64_t total_steps, const std::string& freeze,
                       const std::string& device, uint64_t seed, int threads, bool tf32, bool evaluation) {
             TrainFlags f;
             f.loss = loss;
             f.optimizer = optimizer;
             f.lr = lr;
             f.momentum = momentum;
             f.nesterov = nesterov;
             f.weight_decay = weight_decay;
             f.clip_norm = clip_norm;
             f.dtype = dtype;
             f.loss_scale = loss_scale;
             f.schedule = schedule;
             TrainOptions o;
             if (!target.empty()) o.spec.loss.target = target;
             if (!labels.empty()) o.spec.loss.labels = labels;
             o.spec.freeze = freeze;
             o.schedule.warmup = warmup;
             o.device = device;
             o.seed = seed;
             o.threads = threads;
             o.tf32 = tf32;
             return std::make_unique<Trainer>(model_source(model, name, base_dir), f, o, total_steps, evaluation);
           }),
           py::arg("model"), py::arg("name"), py::arg("base_dir"), py::arg("loss"), py::arg("target"),
           py::arg("labels"), py::arg("optimizer"), py::arg("lr"), py::arg("momentum"), py::arg("nesterov"),
           py::arg("weight_decay"), py::arg("clip_norm"), py::arg("dtype"), py::arg("loss_scale"),
           py::arg("schedule"), py::arg("warmup"), py::arg("total_steps"), py::arg("freeze"), py::arg("device"),
           py::arg("seed"), py::arg("threads"), py::arg("tf32"), py::arg("evaluation"))
      .def("step", &Trainer::step, py::arg("batch"), py::arg("lr") = py::none())
      .def("evaluate", &Trainer::evaluate, py::arg("batches"))
      .def("state_dict", &Trainer::state_dict)
      .def("load_state_dict", &Trainer::load_state_dict, py::arg("state"))
      .def("export", &Trainer::export_model, py::arg("path"), py::arg("training_graph"))
      .def("plot", &Trainer::plot, py::arg("path"), py::arg("title"), py::arg("label"))
      .def_property_readonly("history", &Trainer::history)
      .def_property_readonly("steps", &Trainer::steps)
      .def_property_readonly("skipped_steps", &Trainer::skipped_steps)
      .def_property_readonly("last_step_skipped", &Trainer::last_step_skipped)
      .def_property_readonly("loss_scale", &Trainer::loss_scale)
      .def_property_readonly("lr", &Trainer::next_lr)
      .def_property_readonly("state_names", &Trainer::state_names)
      .def_property_readonly("device", &Trainer::device);
  m.def(
      "plot_training",
      [](const std::string& path, const std::string& title, const std::vector<std::pair<std::string, const Trainer*>>& runs) {
        std::vector<TrainResult> results;
        for (const auto& [label, t] : runs) results.push_back(t->result());
        std::vector<PlottedRun> plotted;
        for (size_t i = 0; i < runs.size(); ++i) plotted.push_back({runs[i].first, results[i]});
        py::gil_scoped_release release;
        write_chart_svg(training_chart(title, plotted), path);
      },
      py::arg("path"), py::arg("title"), py::arg("runs"));
}

}  // namespace amp::python
