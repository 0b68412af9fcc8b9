#include "frontends/lib/cuda_plan_report.h"

#include <cstdio>
#include <sstream>

#include "backends/backend.h"
#include "backends/cuda_module.h"
#include "frontends/lib/model_summary.h"
#include "graph/error.h"
#include "passes/training/training_info.h"

namespace amp {

using nlohmann::ordered_json;

std::pair<std::string, int64_t> parse_dim_assignment(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError("--dim '" + text + "': expected NAME=VALUE, e.g. N=32");
  const std::string value = text.substr(eq + 1);
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || v < 0) throw InputError("--dim '" + text + "': the value must be a non-negative integer");
  return {text.substr(0, eq), v};
}

namespace {

// A zero tensor for every data input, its symbolic dims from `dims`.
std::vector<Tensor> zero_feeds(const Model& m, const std::map<std::string, int64_t>& dims) {
  std::vector<Tensor> feeds;
  for (const Value* v : m.graph->inputs()) {
    if (v->has_initializer()) continue;
    if (!v->type().shape)
      throw InputError(m.path + ": input '" + v->name() + "' has no shape; --cuda-plan needs its rank and dims");
    std::vector<int64_t> shape;
    for (const Dim& d : v->type().shape->dims) {
      if (d.value) {
        shape.push_back(*d.value);
        continue;
      }
      auto it = dims.find(d.param);
      if (d.param.empty() || it == dims.end())
        throw InputError(m.path + ": input '" + v->name() + "' " + v->type().str() + " has dim '" +
                         (d.param.empty() ? "?" : d.param) + "': give it with --dim " +
                         (d.param.empty() ? "NAME" : d.param) + "=VALUE" +
                         (d.param.empty() ? " (this dim has no name: the model must name it)" : ""));
      shape.push_back(it->second);
    }
    Tensor t(v->type().elem, shape);
    t.name = v->name();
    feeds.push_back(std::move(t));
  }
  return feeds;
}

}  // namespace

ordered_json cuda_plan_report(const Model& model, const std::map<std::string, int64_t>& dims) {
  // A saved training step plans as amp-train runs it: its state, updates and fetches.
  CompileOptions options;
  std::vector<std::string> fetch_names;
  const bool training = !model.training_info.empty();
  TrainingStep step;
  if (training) {
    step = step_from_training_info(model);
    options.state = step.state;
    options.state_updates = step.updates;
    // As TrainingSession::run_step fetches: the correct count, or the scores of a step saved
    // before the step counted.
    const std::string& accuracy = step.correct.empty() ? step.target : step.correct;
    for (const std::string& name : {step.loss, step.classification ? accuracy : std::string(), step.all_finite, step.loss_scale})
      if (!name.empty()) fetch_names.push_back(name);
  } else {
    for (const Value* v : model.graph->outputs()) fetch_names.push_back(v->name());
  }
  const Model& m = training ? step.model : model;
  const std::vector<Tensor> feeds = zero_feeds(m, dims);
  // The device half runs in the CUDA backend's module (backends/cuda/plan_report.h).
  using PlanReport = void (*)(const Model*, const CompileOptions*, const std::vector<Tensor>*,
                              const std::vector<std::string>*, std::string (*)(int64_t), ordered_json*);
  std::string why;
  const auto plan_report = reinterpret_cast<PlanReport>(cuda_module_symbol("amp_cuda_module_plan_report", &why));
  if (!plan_report) throw InputError("--cuda-plan: cuda backend not available: " + why);
  ordered_json device;
  plan_report(&m, &options, &feeds, &fetch_names, &human_bytes, &device);
  ordered_json dims_json = ordered_json::object();
  for (const auto& [k, v] : dims) dims_json[k] = v;
  ordered_json j;
  j["model"] = model.path;
  j["graph"] = training ? "training step" : "inference";
  j["dims"] = dims_json;
  for (const auto& item : device.items()) j[item.key()] = item.value();
  return j;
}

std::string cuda_plan_text(const ordered_json& j) {
  std::ostringstream s;
  std::string dims;
  for (const auto& [k, v] : j["dims"].items()) dims += (dims.empty() ? "" : ", ") + k + "=" + std::to_string(v.get<int64_t>());
  s << "cuda plan of the " << j["graph"].get<std::string>() << (dims.empty() ? "" : " at " + dims)
    << " (worked out without a device):\n";
  size_t k = 0;
  for (const auto& u : j["units"]) {
    std::string kind = u["kind"].get<std::string>();
    if (kind.size() > 44) kind = kind.substr(0, 41) + "...";
    char line[80];
    std::snprintf(line, sizeof line, "%4zu  %-44s  ", k++, kind.c_str());
    s << line << u["node"].get<std::string>() << "  ->";
    const auto& outputs = u["outputs"];
    for (size_t i = 0; i < outputs.size() && i < 3; ++i) s << " " << outputs[i].get<std::string>();
    if (outputs.size() > 3) s << " (and " << outputs.size() - 3 << " more)";
    if (u.value("layout", "") == "NHWC") s << "  [computes NHWC]";
    for (const auto& c : u["conversions"])
      s << "  [transposes " << c["value"].get<std::string>() << " to " << c["to"].get<std::string>() << "]";
    s << "\n";
  }
  s << "device units: " << j["device_units"] << " (" << j["fused_kernels"]["units"] << " generated kernels covering "
    << j["fused_kernels"]["nodes"] << " nodes, " << j["fused_kernels"]["multi_tensor"] << " of them multi-tensor)\n";
  int views = 0;
  std::string view_kinds;
  for (const auto& [kind, n] : j["views"].items()) {
    views += n.get<int>();
    view_kinds += (view_kinds.empty() ? "" : ", ") + std::to_string(n.get<int>()) + " " + kind;
  }
  s << "views:        " << views << (views ? " (" + view_kinds + "): the same bytes, nothing runs" : "") << "\n";
  s << "host steps:   " << j["host_steps"] << " (shape arithmetic and constants, computed while planning";
  std::string ops;
  for (const auto& [op, n] : j["host_step_ops"].items()) ops += (ops.empty() ? ": " : ", ") + op + " " + n.dump();
  s << ops << ")\n";
  if (j["read_through"].get<size_t>() > 0)
    s << "read through: " << j["read_through"]
      << " (copies composed into their readers', pass-throughs, their views: every reader reads past them)\n";
  const auto& cl = j["channels_last"];
  if (cl["units"].get<size_t>() > 0)
    s << "layout:       " << cl["units"] << " units compute channels-last (NHWC); " << cl["conversions"]
      << " transposes where their region meets row-major values, moving "
      << human_bytes(cl["conversion_bytes"].get<int64_t>()) << " (in the traffic below)\n";
  if (j.contains("padded_rows") && !j["padded_rows"].empty()) {
    s << "padded rows:  " << j["padded_rows"].size()
      << " values stored with rows a multiple of 16 bytes apart, which the products read and write where they are:";
    for (const auto& v : j["padded_rows"]) s << " " << v["value"].get<std::string>() << " (" << v["type"].get<std::string>() << ")";
    s << "\n";
  }
  const auto& mem = j["memory"];
  s << "memory:       arena " << human_bytes(mem["arena_bytes"].get<int64_t>()) << " (live at most "
    << human_bytes(mem["peak_live_bytes"].get<int64_t>()) << ", " << human_bytes(mem["without_reuse_bytes"].get<int64_t>())
    << " without reuse), state " << human_bytes(mem["state_bytes"].get<int64_t>())
    << "; cuBLASLt/cuDNN workspace is chosen on the device\n";
  s << "traffic:      " << human_bytes(mem["moved_bytes"].get<int64_t>())
    << " read and written by the device units per run, each operand once (a lower bound)\n";
  return s.str();
}

}  // namespace amp
