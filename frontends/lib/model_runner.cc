#include "frontends/lib/model_runner.h"

#include <spdlog/spdlog.h>

#include <set>

#include "frontends/lib/non_finite.h"
#include "graph/error.h"

namespace amp {

ModelRunner::ModelRunner(const Model& m, const std::string& model_path, const RunSettings& settings)
    : model_path_(model_path) {
  for (const Value* v : m.graph->inputs())
    if (!v->has_initializer()) inputs_.emplace_back(v->name(), v->type());
  for (const Value* v : m.graph->outputs()) fetches_.push_back(v->name());
  backend_ = make_backend(settings.device);
  CompileOptions options;
  options.threads = settings.threads;
  options.seed = settings.seed;
  options.tf32 = settings.tf32;
  exe_ = backend_->compile(m, options);
}

NamedTensors ModelRunner::run(NamedTensors feeds, const std::string& feeds_source) {
  std::set<std::string> graph_inputs;
  for (const auto& [name, type] : inputs_) graph_inputs.insert(name);
  NamedTensors used;
  for (auto& [key, t] : feeds) {
    if (graph_inputs.count(key))
      used.emplace_back(key, std::move(t));
    else
      spdlog::warn("{}: array '{}' is not a graph input; ignored", feeds_source, key);
  }
  for (const auto& [name, type] : inputs_) {
    bool fed = false;
    for (const auto& f : used) fed = fed || f.first == name;
    if (!fed) throw InputError(feeds_source + ": no array '" + name + "' for graph input " + name + " (" + type.str() + ")");
  }
  std::vector<Tensor> outputs = exe_->run(used, fetches_);
  NamedTensors named;
  for (size_t i = 0; i < fetches_.size(); ++i) {
    // Said, not averaged away: which outputs hold NaN or inf, and from which sample on.
    const NonFiniteCount c = count_non_finite(outputs[i]);
    if (c.any())
      spdlog::warn("{}: output '{}' has {}", model_path_, fetches_[i],
                   c.text(outputs[i].dims.empty() ? 1 : outputs[i].dims[0]));
    named.emplace_back(fetches_[i], std::move(outputs[i]));
  }
  return named;
}

}  // namespace amp
