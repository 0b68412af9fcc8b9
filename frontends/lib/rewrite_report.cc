#include "frontends/lib/rewrite_report.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_set>

#include "passes/amp/tensor_core_alignment.h"

namespace amp {

using nlohmann::ordered_json;

namespace {

void for_each_node(const Graph& g, const std::function<void(const Node&)>& fn) {
  for (const Node* n : g.nodes()) {
    fn(*n);
    for (const Graph* sub : n->subgraphs()) for_each_node(*sub, fn);
  }
}

std::string bytes_text(int64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while ((v >= 1e3 || v <= -1e3) && u < 3) {
    v /= 1e3;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace

int64_t activation_bytes(const Model& m, bool low_precision_as_fp32) {
  // Activations are what depends on the graph's inputs; values computed from weights alone (the
  // Casts of fp32 weights kept as masters) are not counted.
  std::unordered_set<const Value*> activation;
  for (const Value* v : m.graph->inputs())
    if (!v->has_initializer()) activation.insert(v);
  int64_t total = 0;
  for_each_node(*m.graph, [&](const Node& n) {
    for (const Graph* sub : n.subgraphs())
      for (const Value* v : sub->inputs()) activation.insert(v);
    bool depends = false;
    for (const Value* v : Graph::all_reads(&n)) depends = depends || activation.count(v);
    if (!depends) return;
    for (const Value* v : n.outputs()) {
      if (!v) continue;
      activation.insert(v);
      if (!v->type().is_tensor() || !v->type().shape) continue;
      int64_t elems = 1;
      for (const Dim& d : v->type().shape->dims) elems *= d.is_static() ? *d.value : 1;
      const bool low = v->dtype() == DType::kFloat16 || v->dtype() == DType::kBFloat16;
      total += elems * static_cast<int64_t>(dtype_size(low && low_precision_as_fp32 ? DType::kFloat : v->dtype()));
    }
  });
  return total;
}

int64_t count_casts(const Model& m) {
  int64_t n = 0;
  for_each_node(*m.graph, [&](const Node& node) { n += node.domain().empty() && node.op_type() == "Cast"; });
  return n;
}

ordered_json rewrite_report(const RewriteFacts& facts, const AmpPolicy& policy, const AmpResult& result,
                            const std::vector<PassRun>& passes) {
  const DType target = policy.target();
  ordered_json j;
  j["model"] = facts.model_path;
  j["output"] = facts.output_path;
  if (!facts.external_data_path.empty()) j["external_data"] = facts.external_data_path;
  j["dtype"] = precision_name(Precision::kLow, target);
  j["keep_io_types"] = policy.keep_io_types;
  j["weights"] = policy.weights == WeightStorage::kKeep ? "keep" : "lowp";
  j["cast_placement"] = cast_placement_name(policy.cast_placement);
  j["min_magnitude"] = policy.min_magnitude;

  std::map<std::string, int64_t> per_precision;
  ordered_json nodes = ordered_json::array();
  for (const NodeDecision& nd : result.decisions.nodes) {
    const Decision& d = nd.decision;
    const std::string p = precision_name(d.precision, target);
    ++per_precision[p];
    ordered_json n;
    n["node"] = nd.ref;
    n["op"] = nd.op;
    n["precision"] = p;
    n["rule"] = rule_name(d.rule);
    n["reason"] = d.reason;
    if (!d.from.empty()) n["from"] = d.from;
    if (!d.measurements.empty()) {
      ordered_json measured = ordered_json::object();
      for (const auto& [key, value] : d.measurements) measured[key] = value;
      n["measurements"] = measured;
    }
    nodes.push_back(std::move(n));
  }
  ordered_json counts = ordered_json::object();
  for (const auto& [p, n] : per_precision) counts[p] = n;
  j["nodes_per_precision"] = counts;

  const CastReport& c = result.casts;
  ordered_json removed = ordered_json::object();
  int64_t removed_total = 0;
  for (const PassRun& r : passes)
    if (r.name == "cast-cleanup")
      for (const auto& [what, n] : r.stats) {
        if (what == "exact chains shortened") continue;  // not a removal by itself
        removed[what] = removed.value(what, int64_t{0}) + n;
        removed_total += n;
      }
  j["casts"] = {{"before", facts.casts_before},
                {"after", facts.casts_after},
                {"inserted", c.casts_added},
                {"retargeted", c.casts_retargeted},
                {"removed", removed_total},
                {"removed_by_kind", removed}};
  j["values_retyped"] = c.values_retyped;
  j["constants_converted"] = c.constants_converted;
  ordered_json clamps = ordered_json::array();
  for (const ClampRecord& r : c.clamps)
    clamps.push_back({{"tensor", r.tensor},
                      {"clamped", r.clamped},
                      {"max_error", r.max_error},
                      {"flushed_to_zero", r.flushed_to_zero},
                      {"raised_to_min_magnitude", r.raised}});
  j["clamps"] = clamps;
  j["warnings"] = c.warnings;
  // Allow-listed ops whose schema at the model's opset does not take the target type (Conv and
  // ConvTranspose in bf16 at opset 17): they stay fp32 so the output stays valid ONNX, and the
  // summary says so.
  std::map<std::string, int64_t> forbidden;
  std::string forbidden_reason;
  for (const NodeDecision& nd : result.decisions.nodes) {
    if (nd.decision.rule != Rule::kSchemaForbids) continue;
    const std::string domain = nd.node ? nd.node->domain() : "";
    const OpListEntry* e = policy.entry(domain, nd.op);
    if (!e || e->category != OpCategory::kAllow) continue;
    ++forbidden[nd.op];
    if (forbidden_reason.empty()) forbidden_reason = nd.decision.reason;
  }
  ordered_json kept = ordered_json::object();
  for (const auto& [op, n] : forbidden) kept[op] = n;
  j["allow_listed_kept_fp32_by_schema"] = {{"ops", kept}, {"example_reason", forbidden_reason}};
  j["activation_bytes"] = {{"before", facts.activation_bytes_before},
                           {"after", facts.activation_bytes_after},
                           {"saved", facts.activation_bytes_before - facts.activation_bytes_after},
                           {"note", "node outputs that depend on graph inputs, no reuse; each symbolic dim counted as 1"}};
  ordered_json alignment = ordered_json::array();
  for (const MisalignedProduct& p : find_misaligned_products(result.decisions)) {
    ordered_json fixes = ordered_json::array();
    for (const MisalignedDim& d : p.dims)
      fixes.push_back({{"dim", d.role}, {"size", d.size}, {"pad_to", d.padded}, {"padding", d.padded - d.size}});
    alignment.push_back({{"node", p.node}, {"op", p.op}, {"fixes", fixes}});
  }
  j["tensor_core_alignment"] = alignment;
  ordered_json runs = ordered_json::array();
  for (const PassRun& r : passes) runs.push_back({{"pass", r.name}, {"seconds", r.seconds}, {"changed", r.changed}, {"stats", r.stats}});
  j["passes"] = runs;
  j["nodes"] = nodes;
  return j;
}

std::string rewrite_summary_text(const ordered_json& j) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  const std::string data = j.contains("external_data") ? " and " + j["external_data"].get<std::string>() : "";
  line("amp-rewrite: wrote " + j["output"].get<std::string>() + data + " from " + j["model"].get<std::string>() + " (" +
       j["dtype"].get<std::string>() + (j["keep_io_types"].get<bool>() ? ", keep_io_types" : "") + ", weights " +
       j["weights"].get<std::string>() + ", casts at " + j["cast_placement"].get<std::string>() + " ops)");
  std::string counts;
  for (const auto& [p, n] : j["nodes_per_precision"].items())
    counts += (counts.empty() ? "" : ", ") + std::to_string(n.get<int64_t>()) + " " + (p == "-" ? "without float data" : p);
  line("  nodes: " + counts);
  const auto& c = j["casts"];
  line("  casts: " + std::to_string(c["inserted"].get<int64_t>()) + " inserted, " +
       std::to_string(c["retargeted"].get<int64_t>()) + " retargeted, " + std::to_string(c["removed"].get<int64_t>()) +
       " removed (Cast nodes " + std::to_string(c["before"].get<int64_t>()) + " -> " +
       std::to_string(c["after"].get<int64_t>()) + ")");
  std::string clamps = "none clamped";
  if (!j["clamps"].empty()) {
    int64_t clamped = 0, flushed = 0, raised = 0;
    double worst = 0;
    for (const auto& r : j["clamps"]) {
      clamped += r["clamped"].get<int64_t>();
      flushed += r["flushed_to_zero"].get<int64_t>();
      raised += r["raised_to_min_magnitude"].get<int64_t>();
      worst = std::max(worst, r["max_error"].get<double>());
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%lld values clamped (largest error %g), %lld flushed to zero, in %zu tensors",
                  static_cast<long long>(clamped), worst, static_cast<long long>(flushed), j["clamps"].size());
    clamps = buf;
    if (raised) clamps += ", " + std::to_string(raised) + " raised to the minimum magnitude";
  }
  line("  constants: " + std::to_string(j["constants_converted"].get<int64_t>()) + " converted, " + clamps);
  for (const auto& w : j["warnings"]) line("  warning: " + w.get<std::string>());
  if (j.contains("allow_listed_kept_fp32_by_schema") && !j["allow_listed_kept_fp32_by_schema"]["ops"].empty()) {
    const auto& k = j["allow_listed_kept_fp32_by_schema"];
    int64_t total = 0;
    std::string ops;
    for (const auto& [op, n] : k["ops"].items()) {
      total += n.get<int64_t>();
      ops += (ops.empty() ? "" : ", ") + std::to_string(n.get<int64_t>()) + " " + op;
    }
    const std::string dtype = j["dtype"].get<std::string>();
    line("  warning: " + std::to_string(total) + " allow-listed op" + (total == 1 ? "" : "s") + " (" + ops +
         ") stay fp32: the model's opset does not allow " + dtype + " for them (" +
         k["example_reason"].get<std::string>() +
         "), and the output must stay valid ONNX. No opset of the ONNX library here allows it either (ONNX added bfloat16 to Conv in opset 22). "
         "To run them in low precision: --dtype fp16, or train with amp-train --dtype " + dtype +
         ", whose step runs them in " + dtype + ".");
  }
  for (const auto& r : j["passes"])
    if (r["pass"] == "recognize-layer-norm" && r["stats"].contains("decomposed LayerNorms recognised")) {
      const int64_t n = r["stats"]["decomposed LayerNorms recognised"].get<int64_t>();
      line("  layer norms: " + std::to_string(n) + " decomposed LayerNorm" + (n == 1 ? "" : "s") +
           " recognised as LayerNormalization");
    } else if (r["pass"] == "flatten-linear" && r["stats"].contains("linear layers flattened")) {
      const int64_t n = r["stats"]["linear layers flattened"].get<int64_t>();
      line("  linear layers: " + std::to_string(n) + " batched MatMul + bias on 2-D rows (Flatten before, Reshape "
           "after), so that the Cast from the fp32 op before " + (n == 1 ? "it" : "each") +
           " meets ONNX Runtime's when it fuses them into a Gemm (flatten-linear)");
    }
  int64_t quantized = 0;
  for (const auto& n : j["nodes"]) quantized += n.contains("rule") && n["rule"] == "quantized";
  if (quantized)
    line("  quantized: " + std::to_string(quantized) + " node" + (quantized == 1 ? "" : "s") +
         " of quantized (QDQ) regions left as they are (QuantizeLinear, DequantizeLinear and the ops between them, "
         "which ONNX Runtime runs as integer kernels)");
  const auto& a = j["activation_bytes"];
  line("  activations (estimate, symbolic dims as 1): " + bytes_text(a["before"].get<int64_t>()) + " -> " +
       bytes_text(a["after"].get<int64_t>()) + ", " + bytes_text(a["saved"].get<int64_t>()) + " saved");
  if (!j["tensor_core_alignment"].empty())
    line("  tensor cores: " + std::to_string(j["tensor_core_alignment"].size()) +
         " low-precision products have dimensions that are not multiples of 8 (padding in --report)");
  std::string timings;
  for (const auto& r : j["passes"]) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.2f ms", timings.empty() ? "" : ", ", r["pass"].get<std::string>().c_str(),
                  r["seconds"].get<double>() * 1e3);
    timings += buf;
  }
  line("  passes: " + timings);
  return s;
}

}  // namespace amp
