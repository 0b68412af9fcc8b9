#include "passes/training/select_parameters.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/ops/shape_rules.h"

namespace amp {

SelectParametersPass::SelectParametersPass(TrainingGraph& tg, const std::string& freeze) : tg_(tg), pattern_(freeze) {
  try {
    freeze_ = std::regex(freeze.empty() ? "$^" : freeze);
  } catch (const std::regex_error& e) {
    throw InputError("--freeze '" + freeze + "' is not a valid regular expression: " + e.what());
  }
}

bool SelectParametersPass::run(Model& m) {
  for (Value* v : m.graph->initializers()) {
    if (!is_floating(v->dtype())) continue;
    bool running_stat = false;
    for (const Use& u : v->uses())
      running_stat = running_stat || (u.node->op_type() == "BatchNormalization" && u.index >= 3);
    if (running_stat) continue;
    // Contents that decide a shape (Resize's scales) are the graph's constants, not weights: they
    // get no gradient, and weight decay would move them.
    bool decides_shape = false;
    for (const Use& u : v->uses()) {
      const ShapeRule* rule = find_shape_rule(u.node->domain(), u.node->op_type());
      decides_shape = decides_shape || (rule && std::count(rule->value_inputs.begin(), rule->value_inputs.end(),
                                                           static_cast<int>(u.index)) > 0);
    }
    if (decides_shape) continue;
    if (std::regex_match(v->name(), freeze_)) {
      count("frozen");
      continue;
    }
    tg_.params.push_back(TrainedParam{v, nullptr});
    tg_.keep_state(v);
    count("trainable");
  }
  return !tg_.params.empty();
}

}  // namespace amp
