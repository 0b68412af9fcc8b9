#include "passes/amp/amp_passes.h"

#include <charconv>

#include "passes/amp/decision_record.h"

namespace amp {

bool AmpColourPass::run(Model& m) {
  stats_.clear();
  result_.decisions = colour(m, policy_);
  for (const NodeDecision& nd : result_.decisions.nodes)
    if (nd.decision.rule != Rule::kCast && nd.decision.rule != Rule::kConstant)
      count("nodes " + precision_name(nd.decision.precision, policy_.target()));
  return false;
}

bool AmpInsertCastsPass::run(Model& m) {
  stats_.clear();
  const CastReport& r = result_.casts = insert_casts(m, policy_, result_.decisions);
  count("casts added", r.casts_added);
  count("casts retargeted", r.casts_retargeted);
  count("values retyped", r.values_retyped);
  count("constants converted", r.constants_converted);
  for (const ClampRecord& c : r.clamps) count("values clamped", c.clamped);
  return r.casts_added || r.casts_retargeted || r.values_retyped || r.constants_converted;
}

namespace {

// The shortest text that reads back as the same float ("1e-07").
std::string format_min_magnitude(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

bool record_graph(Graph& g, const AmpResult& result, DType target) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    for (Graph* sub : n->subgraphs()) changed |= record_graph(*sub, result, target);
    const NodeDecision* nd = result.decisions.find(n);
    // Casts are recorded from themselves: the ones inserted after colouring have no decision yet.
    const Decision d = n->domain().empty() && n->op_type() == "Cast" ? cast_decision(*n) : nd ? nd->decision : Decision{};
    if (!nd && d.rule != Rule::kCast) continue;
    const std::string before = n->doc_string;
    write_decision_record(*n, make_decision_record(d, target));
    changed |= n->doc_string != before;
  }
  return changed;
}

}  // namespace

bool AmpRecordDecisionsPass::run(Model& m) {
  stats_.clear();
  bool changed = record_graph(*m.graph, result_, policy_.target());
  const std::string settings = "dtype=" + precision_name(Precision::kLow, policy_.target()) +
                               " keep_io_types=" + (policy_.keep_io_types ? "true" : "false") +
                               " weights=" + (policy_.weights == WeightStorage::kKeep ? "keep" : "lowp") +
                               " cast_placement=" + cast_placement_name(policy_.cast_placement) +
                               (policy_.min_magnitude > 0 ? " min_magnitude=" + format_min_magnitude(policy_.min_magnitude) : "");
  const std::string* old = m.metadata(kRewriteSettingsKey);
  changed |= !old || *old != settings;
  m.set_metadata(kRewriteSettingsKey, settings);
  return changed;
}

}  // namespace amp
