#include "frontends/lib/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "backends/backend.h"
#include "frontends/lib/calibration_probe.h"
#include "frontends/lib/model_copy.h"
#include "graph/error.h"
#include "graph/half.h"
#include "graph/onnx_io.h"
#include "passes/amp/insert_casts.h"
#include "passes/fusion/recognize_gelu.h"
#include "passes/fusion/recognize_layer_norm.h"
#include "passes/name_nodes.h"
#include "passes/pipelines.h"
#include "passes/training/eval_mode.h"

namespace amp {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A node whose own 16-bit output differs from fp32 by more than this many unit roundoffs (of max
// |fp32|) is a suspect: rounding its inputs and its output once each explains about 2u (the
// largest own error of any node of calibration_models.py's unmodified ResNet-18 is 1.95u, of the
// SSD heads and the MLP 1.07u and 1.04u); cancellation (x - y with x ≈ y) gives orders of
// magnitude more.
constexpr double kSuspectRoundoffs = 8;

// The default E over the floor: storing every activation in 16 bits adds about as much error
// again as storing the inputs and weights (the op-list fp16 rewrite over the floor, measured in
// ONNX Runtime on calibration_models.py's models: ResNet-18 1.11, the SSD-style heads 0.99).
constexpr double kFloorSlack = 2;

double unit_roundoff(DType low) { return std::ldexp(1.0, low == DType::kBFloat16 ? -8 : -11); }

std::string num(double v) {
  if (std::isinf(v)) return "inf";
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// x with the significant bits of the 16-bit type (11 for fp16, 8 for bf16), rounded to nearest
// even, and fp32's range: the precision a 16-bit value has, without its overflow and underflow,
// which placement can remove (an fp32 node never rounds into the 16-bit range). Rounded on the
// bits: the floor rounds every weight the op lists lower, ResNet-18's 11.7 million, which took
// 0.75 s with frexp/ldexp on the project's loaded 2-core machine and takes 0.16-0.24 s so (the same
// results on 2e7 random bit patterns).
float with_low_precision(float x, DType low) {
  const uint32_t u = float_bits(x);
  const uint32_t exponent = u & 0x7f800000u;
  if (exponent == 0x7f800000u || (u & 0x7fffffffu) == 0) return x;  // inf, NaN, ±0
  if (exponent == 0) {  // fp32 subnormal: the bits below its own leading one
    int e = 0;
    const double m = std::frexp(static_cast<double>(x), &e);  // x = m 2^e, 0.5 <= |m| < 1
    const int bits = low == DType::kBFloat16 ? 8 : 11;
    return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits));
  }
  // Round to nearest even at the last kept bit of the mantissa (13 of fp32's 23 dropped for fp16's
  // 11 significant bits, 16 for bf16's 8); a carry into the exponent is the correct rounding, up
  // to inf beyond fp32's largest value.
  const int drop = low == DType::kBFloat16 ? 16 : 13;
  const uint32_t half = (1u << (drop - 1)) - 1 + ((u >> drop) & 1u);
  return bits_float((u + half) & ~((1u << drop) - 1));
}

Tensor with_low_precision(const Tensor& t, DType low) {
  if (t.dtype != DType::kFloat) return t;
  Tensor r(DType::kFloat, t.dims);
  r.name = t.name;
  const float* in = t.as<float>();
  float* out = r.mutable_as<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) out[i] = with_low_precision(in[i], low);
  return r;
}

Feeds with_low_precision(const Feeds& feeds, DType low) {
  Feeds out;
  for (const auto& [name, t] : feeds) out.emplace_back(name, with_low_precision(t, low));
  return out;
}

// The model's error on one output: max-relative or top-1 disagreement (calibrate.h).
double output_error(const Tensor& ref, const Tensor& y, CalibrationMetric metric) {
  if (metric == CalibrationMetric::kMaxRelative) return tensor_difference(ref, y).relative();
  const int64_t n = std::min(ref.numel(), y.numel());
  const int64_t cols = ref.dims.empty() ? 1 : std::max<int64_t>(ref.dims.back(), 1);
  const int64_t rows = n / cols;
  if (rows == 0) return 0;
  int64_t differ = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t a = 0, b = 0;
    bool finite = true;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      finite = finite && std::isfinite(y.element(i));
      if (ref.element(i) > ref.element(r * cols + a)) a = c;
      if (y.element(i) > y.element(r * cols + b)) b = c;
    }
    differ += !finite || a != b;
  }
  return static_cast<double>(differ) / static_cast<double>(rows);
}

struct ModelError {
  double error = 0;
  std::string worst;
};

ModelError model_error(const std::vector<std::string>& names, const std::vector<Tensor>& ref,
                       const std::vector<Tensor>& y, CalibrationMetric metric) {
  ModelError e;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!is_floating(ref[i].dtype)) continue;
    const double err = output_error(ref[i], y[i], metric);
    if (err > e.error || e.worst.empty() || std::isnan(err)) e = {std::isnan(err) ? kInf : err, names[i]};
  }
  return e;
}

// Where a calibration's seconds go (CalibrationResult::seconds_by_phase), in first-seen order.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<std::pair<std::string, double>>& phases) : phases_(phases) {}
  // Charges the time since the previous lap (or since construction) to `phase`.
  void lap(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    add(phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  void add(const std::string& phase, double seconds) {
    for (auto& [name, s] : phases_)
      if (name == phase) {
        s += seconds;
        return;
      }
    phases_.emplace_back(phase, seconds);
  }

 private:
  std::vector<std::pair<std::string, double>>& phases_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Compiles and runs models on the CPU backend, counting the evaluations and charging compiling
// and running to their phases.
class Evaluator {
 public:
  Evaluator(int threads, PhaseClock& clock) : cpu_(make_backend("cpu")), clock_(clock) {
    options_.threads = threads;
    // Each executable runs once: convolution weights kept as state in oneDNN's blocked layout cost
    // three copies of every weight before the run (CpuExecutable::set_state_layout), where each
    // convolution otherwise reorders its weights once, as it reads them (calibration_models.py's
    // ResNet-18: 1.1-1.3 s instead of 1.7-2.1 s for its 4 evaluations, same results).
    options_.native_weight_layouts = false;
  }
  std::vector<Tensor> run(const Model& m, const Feeds& feeds, const std::vector<std::string>& fetches) {
    ++count;
    // A rewrite without keep_io_types takes 16-bit inputs: the feeds are converted as a caller would.
    Feeds typed;
    ClampRecord clamps;  // a value beyond the 16-bit range clamps, as the rewrite's feeds do
    for (const auto& [name, t] : feeds) {
      const Value* v = m.graph->value(name);
      typed.emplace_back(name, v && is_low_precision(v->dtype()) && t.dtype == DType::kFloat
                                   ? convert_tensor(t, v->dtype(), &clamps)
                                   : t);
    }
    std::unique_ptr<Executable> exe = cpu_->compile(m, options_);
    clock_.lap("compile");
    std::vector<Tensor> out = exe->run(typed, fetches);
    clock_.lap("run");
    return out;
  }
  int count = 0;

 private:
  std::unique_ptr<Backend> cpu_;
  PhaseClock& clock_;
  CompileOptions options_;
};

std::vector<int64_t> dims_of(const Value* v, const std::map<std::string, std::vector<int64_t>>& fetched) {
  if (!v) return {};
  if (v->has_initializer()) return v->initializer().dims;
  auto it = fetched.find(v->name());
  return it == fetched.end() ? std::vector<int64_t>{} : it->second;
}

bool is_product(const Node& n) {
  static const std::set<std::string> products = {"Conv", "ConvTranspose", "MatMul", "Gemm"};
  return n.domain().empty() && products.count(n.op_type());
}

std::string kept_reason(const KeptNode& k, DType low, double target) {
  const std::string type = low == DType::kBFloat16 ? "bf16" : "fp16";
  const NodeMeasurement& m = k.measured;
  std::string s = k.why == "overflow"
                      ? "its own " + type + " result overflows: " + std::to_string(m.overflow) + " of " +
                            std::to_string(m.values) + " values finite in fp32 are inf or NaN in " + type
                      : "its own " + type + " result differs from fp32 by " + num(m.local_error) + " of max |fp32| (" +
                            num(m.local_error / unit_roundoff(low)) + " unit roundoffs)";
  s += " on the calibration inputs; keeping it";
  if (k.kept_with) s += " (with " + std::to_string(k.kept_with) + " other node" + (k.kept_with == 1 ? "" : "s") + ")";
  s += " took the output error from " + num(k.error_before) + " to " + num(k.error_after) + " (E " + num(target) + ")";
  return s;
}

}  // namespace

const char* calibration_metric_name(CalibrationMetric m) {
  return m == CalibrationMetric::kTop1 ? "top1" : "max-relative";
}

CalibrationMetric parse_calibration_metric(const std::string& s) {
  if (s == "max-relative") return CalibrationMetric::kMaxRelative;
  if (s == "top1") return CalibrationMetric::kTop1;
  throw InputError("--metric must be max-relative or top1, not '" + s + "'");
}

void check_calibration_feeds(const Model& model, const Feeds& feeds, const std::string& source) {
  const Graph& g = *model.graph;
  std::string names;
  for (const Value* v : g.inputs())
    if (!v->has_initializer()) names += (names.empty() ? "" : ", ") + v->name();
  std::set<std::string> fed;
  for (const auto& [name, t] : feeds) {
    const Value* v = g.value(name);
    if (!v || !v->is_input())
      throw InputError(source + ": array '" + name + "' is not an input of " + model.path + " (its inputs: " + names + ")");
    const std::string where = source + ": input '" + name + "': ";
    const ValueType& type = v->type();
    if (t.dtype != type.elem)
      throw InputError(where + std::string(dtype_name(t.dtype)) + " array, the model's input is " + type.str());
    if (type.shape) {
      bool fits = type.shape->rank() == t.dims.size();
      for (size_t i = 0; fits && i < t.dims.size(); ++i)
        fits = !type.shape->dims[i].is_static() || *type.shape->dims[i].value == t.dims[i];
      if (!fits) {
        std::string dims;
        for (int64_t d : t.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
        throw InputError(where + "shape [" + dims + "], the model's input is " + type.str());
      }
    }
    if (t.numel() == 0) throw InputError(where + "holds no values");
    if (is_floating(t.dtype))
      for (int64_t i = 0, n = t.numel(); i < n; ++i)
        if (!std::isfinite(t.element(i)))
          throw InputError(where + "value " + std::to_string(i) + " is " + num(t.element(i)) +
                           ": calibration compares finite outputs");
    fed.insert(name);
  }
  for (const Value* v : g.inputs())
    if (!v->has_initializer() && !fed.count(v->name()))
      throw InputError(source + ": input '" + v->name() + "': no array for it (" + v->type().str() + ")");
}

void CalibrationResult::apply(AmpPolicy& policy) const {
  for (const KeptNode& k : kept) {
    const NodeMeasurement& m = k.measured;
    policy.keep_calibrated(
        k.node, {"kept fp32 by calibration: " + kept_reason(k, policy.target(), target),
                 {{"own_error", num(m.local_error)},
                  {"overflow", std::to_string(m.overflow)},
                  {"underflow", std::to_string(m.underflow)},
                  {"values", std::to_string(m.values)},
                  {"macs", std::to_string(m.macs)},
                  {"output_error_before", num(k.error_before)},
                  {"output_error_after", num(k.error_after)},
                  {"target", num(target)},
                  {"step", std::to_string(k.step)}}});
  }
}

CalibrationResult calibrate(const Model& model, const Feeds& feeds, const AmpPolicy& policy,
                            const CalibrationOptions& options, const std::string& source) {
  const auto start = std::chrono::steady_clock::now();
  CalibrationResult r;
  PhaseClock clock(r.seconds_by_phase);
  check_calibration_feeds(model, feeds, source);
  const DType low = policy.target();
  r.dtype = low == DType::kBFloat16 ? "bf16" : "fp16";
  r.metric = options.metric;

  Model prepared = copy_model(model);
  if (options.training_forward) {
    // As amp-train's step sees its forward (training_step.h), in eval mode: Dropout's masks and
    // batch statistics would differ from one evaluation to the next.
    NameNodesPass().run(prepared);
    EvalModePass().run(prepared);
    RecognizeGeluPass().run(prepared);
    RecognizeLayerNormPass().run(prepared);
  } else {
    amp_prepare_pipeline().run(prepared);
  }
  const AmpDecisions op_list = colour(prepared, policy);
  std::vector<const NodeDecision*> candidates;
  for (const NodeDecision& nd : op_list.nodes)
    if (nd.node->graph() == prepared.graph.get() && nd.decision.precision == Precision::kLow &&
        nd.decision.rule != Rule::kCast && !nd.typing.data_outputs.empty())
      candidates.push_back(&nd);
  clock.lap("prepare");

  // 1. The fp32 model with the twins: reference outputs, each node's own error, the products' dims.
  std::vector<std::string> outputs;
  for (const Value* v : prepared.graph->outputs()) outputs.push_back(v->name());
  Model probe = copy_model(prepared);
  const std::vector<NodeTwin> twins = add_low_precision_twins(probe, candidates, low);
  std::vector<std::string> fetches = outputs;
  for (const NodeTwin& t : twins) {
    fetches.insert(fetches.end(), t.fp32_outputs.begin(), t.fp32_outputs.end());
    fetches.insert(fetches.end(), t.low_outputs.begin(), t.low_outputs.end());
  }
  std::vector<const Node*> products;
  for (const Node* n : prepared.graph->nodes())
    if (is_product(*n)) {
      products.push_back(n);
      for (const Value* v : {n->output(0), n->input(0), n->input(1)})
        if (v && !v->has_initializer()) fetches.push_back(v->name());
    }
  std::sort(fetches.begin() + static_cast<std::ptrdiff_t>(outputs.size()), fetches.end());
  fetches.erase(std::unique(fetches.begin() + static_cast<std::ptrdiff_t>(outputs.size()), fetches.end()), fetches.end());
  Evaluator eval(options.threads, clock);
  clock.lap("measure");
  std::map<std::string, Tensor> probed;
  {
    std::vector<Tensor> values = eval.run(probe, feeds, fetches);
    for (size_t i = 0; i < fetches.size(); ++i) probed.emplace(fetches[i], std::move(values[i]));
  }
  std::vector<Tensor> ref;
  for (const std::string& o : outputs) ref.push_back(probed.at(o));
  std::map<std::string, std::vector<int64_t>> dims;
  for (const auto& [name, t] : probed) dims[name] = t.dims;
  std::map<std::string, int64_t> macs;
  for (const Node* n : products) {
    macs[n->name] = product_macs(*n, dims_of(n->output(0), dims), dims_of(n->input(0), dims), dims_of(n->input(1), dims));
    r.macs_total += macs[n->name];
  }
  for (const NodeTwin& t : twins) {
    NodeMeasurement m{t.node, t.op};
    for (size_t k = 0; k < t.fp32_outputs.size(); ++k) {
      const TensorDifference d = tensor_difference(probed.at(t.fp32_outputs[k]), probed.at(t.low_outputs[k]));
      m.local_error = std::max(m.local_error, d.relative());
      m.overflow += d.overflow;
      m.underflow += d.underflow;
      m.values += d.values;
    }
    m.macs = macs.count(t.node) ? macs[t.node] : 0;
    r.measured.push_back(m);
  }
  probed.clear();
  clock.lap("measure");

  // 2. The floor: inputs and the weights the op lists lower at 16-bit precision.
  const Feeds rounded_feeds = with_low_precision(feeds, low);
  {
    Model weights_rounded = copy_model(prepared);
    std::set<std::string> low_nodes;
    for (const NodeDecision* nd : candidates) low_nodes.insert(nd->name);
    for (Value* v : weights_rounded.graph->initializers()) {
      bool read_low = false;
      for (const Use& u : v->uses()) read_low = read_low || low_nodes.count(u.node->name);
      if (read_low && v->initializer().dtype == DType::kFloat)
        weights_rounded.graph->set_initializer(v, with_low_precision(v->initializer(), low));
    }
    clock.lap("floor");
    r.floor = model_error(outputs, ref, eval.run(weights_rounded, rounded_feeds, outputs), options.metric).error;
  }
  r.target_is_default = !options.max_error;
  const double default_target = kFloorSlack * r.floor;
  r.target = options.max_error.value_or(default_target);
  r.below_floor = r.target < r.floor;
  const double goal = r.below_floor ? default_target : r.target;
  // 3. Below the floor, what the inputs alone cost: whether any model of the data reaches E.
  if (r.below_floor)
    r.floor_inputs = model_error(outputs, ref, eval.run(prepared, rounded_feeds, outputs), options.metric).error;
  clock.lap("floor");

  // 4-6. Rewrites with a set of nodes kept, each one evaluation.
  struct Evaluated {
    ModelError error;
    int64_t macs_low = 0;
  };
  auto evaluate = [&](const std::vector<std::string>& keep) {
    AmpPolicy p = policy;
    for (const std::string& name : keep) p.keep_calibrated(name, {});
    Model rewritten = copy_model(prepared);
    AmpResult result;
    amp_rewrite_pipeline(p, result, false).run(rewritten);
    clock.lap("rewrite");
    Evaluated e;
    e.error = model_error(outputs, ref, eval.run(rewritten, feeds, outputs), options.metric);
    for (const NodeDecision& nd : result.decisions.nodes)
      if (nd.decision.precision == Precision::kLow && macs.count(nd.name)) e.macs_low += macs[nd.name];
    clock.lap("compare");
    return e;
  };
  std::map<std::string, const NodeMeasurement*> measured;
  for (const NodeMeasurement& m : r.measured) measured[m.node] = &m;
  std::vector<std::string> keep;
  Evaluated current = evaluate(keep);
  r.error_op_list = current.error.error;
  r.macs_low_op_list = current.macs_low;
  int step = 0;
  auto keep_step = [&](const std::vector<std::string>& batch, const std::string& why) {
    std::vector<std::string> next = keep;
    next.insert(next.end(), batch.begin(), batch.end());
    const Evaluated e = evaluate(next);
    ++step;
    for (const std::string& name : batch) {
      KeptNode k{name, measured.at(name)->op, step, why, current.error.error, e.error.error, batch.size() - 1,
                 *measured.at(name)};
      r.kept.push_back(k);
    }
    keep = std::move(next);
    current = e;
  };

  std::vector<std::string> overflowing, suspects, rest;
  const double suspect_error = kSuspectRoundoffs * unit_roundoff(low);
  std::vector<const NodeMeasurement*> by_cost, by_error;
  for (const NodeMeasurement& m : r.measured) {
    if (m.overflow > 0 || !std::isfinite(m.local_error))
      overflowing.push_back(m.node);
    else
      (m.local_error > suspect_error ? by_cost : by_error).push_back(&m);
  }
  // Suspects cheapest first (equal cost: worse first), then the rest by their own error.
  std::stable_sort(by_cost.begin(), by_cost.end(), [](const NodeMeasurement* a, const NodeMeasurement* b) {
    return a->cost() != b->cost() ? a->cost() < b->cost() : a->local_error > b->local_error;
  });
  std::stable_sort(by_error.begin(), by_error.end(),
                   [](const NodeMeasurement* a, const NodeMeasurement* b) { return a->local_error > b->local_error; });
  std::vector<std::string> queue;
  for (const auto* list : {&by_cost, &by_error})
    for (const NodeMeasurement* m : *list) queue.push_back(m->node);

  if (current.error.error > goal && !overflowing.empty()) keep_step(overflowing, "overflow");
  size_t next = 0, batch = 1;
  while (current.error.error > goal && next < queue.size()) {
    const size_t end = std::min(queue.size(), next + batch);
    const std::vector<std::string> before = keep;
    const Evaluated at_start = current;
    const size_t kept_before = r.kept.size();
    keep_step({queue.begin() + static_cast<std::ptrdiff_t>(next), queue.begin() + static_cast<std::ptrdiff_t>(end)},
              "error");
    if (current.error.error <= goal && end - next > 1) {
      // The batch that reached E: the shortest prefix of it that does, by bisection.
      size_t lo = next + 1, hi = end;  // prefix [next, hi) suffices; [next, lo - 1) is not known to
      Evaluated best = current;
      while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        std::vector<std::string> trial = before;
        trial.insert(trial.end(), queue.begin() + static_cast<std::ptrdiff_t>(next),
                     queue.begin() + static_cast<std::ptrdiff_t>(mid));
        const Evaluated e = evaluate(trial);
        if (e.error.error <= goal) {
          hi = mid;
          best = e;
        } else {
          lo = mid + 1;
        }
      }
      keep = before;
      keep.insert(keep.end(), queue.begin() + static_cast<std::ptrdiff_t>(next),
                  queue.begin() + static_cast<std::ptrdiff_t>(hi));
      r.kept.resize(kept_before + (hi - next));
      for (size_t i = kept_before; i < r.kept.size(); ++i) {
        r.kept[i].error_before = at_start.error.error;
        r.kept[i].error_after = best.error.error;
        r.kept[i].kept_with = hi - next - 1;
      }
      current = best;
    }
    next = end;
    batch *= 2;
  }
  r.error_calibrated = current.error.error;
  r.worst_output = current.error.worst;
  r.macs_low_calibrated = current.macs_low;
  r.reached = r.error_calibrated <= r.target;
  r.evaluations = eval.count;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

nlohmann::ordered_json calibration_json(const CalibrationResult& r) {
  using nlohmann::ordered_json;
  // JSON has no inf: a non-finite error is the string "inf".
  auto value = [](double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(num(v)); };
  ordered_json j;
  j["dtype"] = r.dtype;
  j["metric"] = calibration_metric_name(r.metric);
  j["target"] = value(r.target);
  j["target_is_default"] = r.target_is_default;
  if (r.below_floor) j["floor_inputs"] = value(r.floor_inputs);
  j["floor"] = value(r.floor);
  j["below_floor"] = r.below_floor;
  j["error_op_list"] = value(r.error_op_list);
  j["error_calibrated"] = value(r.error_calibrated);
  j["worst_output"] = r.worst_output;
  j["reached"] = r.reached;
  j["macs"] = {{"total", r.macs_total}, {"low_op_list", r.macs_low_op_list}, {"low_calibrated", r.macs_low_calibrated}};
  j["evaluations"] = r.evaluations;
  j["seconds"] = r.seconds;
  ordered_json phases;
  for (const auto& [phase, seconds] : r.seconds_by_phase) phases[phase] = seconds;
  j["seconds_by_phase"] = phases;
  ordered_json kept = ordered_json::array();
  for (const KeptNode& k : r.kept)
    kept.push_back({{"node", k.node},
                    {"op", k.op},
                    {"step", k.step},
                    {"why", k.why},
                    {"own_error", value(k.measured.local_error)},
                    {"overflow", k.measured.overflow},
                    {"underflow", k.measured.underflow},
                    {"macs", k.measured.macs},
                    {"output_error_before", value(k.error_before)},
                    {"output_error_after", value(k.error_after)}});
  j["kept"] = kept;
  ordered_json measured = ordered_json::array();
  for (const NodeMeasurement& m : r.measured)
    measured.push_back({{"node", m.node},
                        {"op", m.op},
                        {"own_error", value(m.local_error)},
                        {"overflow", m.overflow},
                        {"underflow", m.underflow},
                        {"values", m.values},
                        {"macs", m.macs}});
  j["measured"] = measured;
  return j;
}

namespace {

std::string share(int64_t part, int64_t total) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", total ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 100.0);
  return buf;
}

}  // namespace

std::string calibration_summary_text(const CalibrationResult& r) {
  std::string s = "  calibration: " + std::to_string(r.evaluations) + " evaluations in " + num(r.seconds) +
                  " s; output error (" + calibration_metric_name(r.metric) + ") " + num(r.error_op_list) +
                  " by op lists -> " + num(r.error_calibrated) + " calibrated, E " + num(r.target) +
                  (r.target_is_default ? " (default: 2 x floor)" : "") + "; floor " + num(r.floor) +
                  " (inputs and weights at " + r.dtype + " precision" +
                  (r.below_floor ? "; inputs alone " + num(r.floor_inputs) : "") + ")\n";
  std::map<std::string, int> why;
  for (const KeptNode& k : r.kept) ++why[k.why];
  std::string names;
  for (size_t i = 0; i < r.kept.size() && i < 8; ++i) names += (i ? ", " : "") + r.kept[i].node + " (" + r.kept[i].op + ")";
  if (r.kept.size() > 8) names += ", ...";
  s += "  calibration: kept " + std::to_string(r.kept.size()) + " node" + (r.kept.size() == 1 ? "" : "s") +
       " in fp32";
  if (!r.kept.empty())
    s += " (" + std::to_string(why["overflow"]) + " overflow, " + std::to_string(why["error"]) + " error): " + names;
  s += "; multiply-adds in " + r.dtype + ": " + share(r.macs_low_op_list, r.macs_total) + " by op lists -> " +
       share(r.macs_low_calibrated, r.macs_total) + " calibrated, of " + num(static_cast<double>(r.macs_total)) +
       " multiply-adds\n";
  if (!r.reached && !r.below_floor)
    s += "  calibration: warning: E not reached (worst output '" + r.worst_output + "' at " + num(r.error_calibrated) + ")\n";
  return s;
}

std::string calibration_floor_text(const CalibrationResult& r) {
  const bool inputs = r.floor_inputs > r.target;
  return "cannot reach E " + num(r.target) + " in " + r.dtype + ": rounding the " +
         (inputs ? "inputs alone" : "inputs and weights") + " to " + r.dtype + "'s precision already moves the outputs by " +
         num(inputs ? r.floor_inputs : r.floor) + " (" + calibration_metric_name(r.metric) + "; inputs and weights " +
         num(r.floor) + "), so no placement reaches it short of fp32 everywhere; calibrated for the default E (2 x floor) instead: " +
         num(r.error_calibrated) + " with " + std::to_string(r.kept.size()) + " nodes kept";
}

}  // namespace amp
