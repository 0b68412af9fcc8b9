#include "frontends/lib/model_summary.h"

#include <map>
#include <sstream>

#include "passes/fusion/recognize_attention.h"

namespace amp {

using nlohmann::ordered_json;

static ordered_json value_json(const Value* v) {
  ordered_json j;
  j["name"] = v->name();
  j["type"] = v->type().str();
  return j;
}

std::string node_precision(const Node& n) {
  for (const Value* v : n.outputs())
    if (v && is_floating(v->dtype())) return std::string(dtype_name(v->dtype()));
  return "";
}

ordered_json summarize(const Model& m) {
  const Graph& g = *m.graph;
  ordered_json j;
  j["file"] = m.path;
  j["producer"] = m.producer_name + (m.producer_version.empty() ? "" : " " + m.producer_version);
  j["ir_version"] = m.ir_version;
  ordered_json opsets = ordered_json::object();
  for (const auto& o : m.opset_imports) opsets[o.domain.empty() ? "ai.onnx" : o.domain] = o.version;
  j["opsets"] = opsets;
  j["inputs"] = ordered_json::array();
  for (const Value* v : g.inputs())
    if (!v->has_initializer()) j["inputs"].push_back(value_json(v));
  j["outputs"] = ordered_json::array();
  for (const Value* v : g.outputs()) j["outputs"].push_back(value_json(v));

  std::map<std::string, int64_t> ops;
  int64_t casts = 0;
  for (const Node* n : g.nodes()) {
    ++ops[n->domain().empty() ? n->op_type() : n->domain() + "." + n->op_type()];
    casts += n->op_type() == "Cast" && n->domain().empty();
  }
  j["nodes"] = g.num_nodes();
  j["ops"] = ops;
  j["casts"] = casts;
  const AttentionChains attention = count_attention_chains(m);
  j["attention_chains"] = {{"total", attention.total}, {"causal", attention.causal}, {"masked", attention.masked}};

  int64_t params = 0, bytes = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> per_dtype;
  for (const Value* v : g.initializers()) {
    const Tensor& t = v->initializer();
    const int64_t n = t.numel();
    const int64_t b = t.dtype == DType::kString ? 0 : static_cast<int64_t>(t.nbytes());
    params += n;
    bytes += b;
    auto& d = per_dtype[std::string(dtype_name(t.dtype))];
    d.first += n;
    d.second += b;
  }
  j["parameters"] = params;
  j["parameter_bytes"] = bytes;
  ordered_json by = ordered_json::object();
  for (const auto& [name, cb] : per_dtype) by[name] = {{"count", cb.first}, {"bytes", cb.second}};
  j["parameters_by_dtype"] = by;

  std::map<std::string, int64_t> precisions;
  for (const Node* n : g.nodes()) {
    std::string p = node_precision(*n);
    if (!p.empty()) ++precisions[p];
  }
  j["node_precisions"] = precisions;

  if (!m.training_info.empty()) {
    ordered_json ti = ordered_json::array();
    for (const auto& t : m.training_info) {
      ordered_json e;
      e["algorithm_nodes"] = t.algorithm ? t.algorithm->num_nodes() : 0;
      e["initialization_nodes"] = t.initialization ? t.initialization->num_nodes() : 0;
      e["update_bindings"] = t.update_binding.size();
      ti.push_back(e);
    }
    j["training_info"] = ti;
  }
  return j;
}

std::string human_bytes(int64_t b) {
  std::ostringstream s;
  s.precision(3);
  if (b >= (1 << 20))
    s << static_cast<double>(b) / (1 << 20) << " MiB";
  else if (b >= 1024)
    s << static_cast<double>(b) / 1024 << " KiB";
  else
    s << b << " B";
  return s.str();
}

std::string summary_text(const ordered_json& j) {
  std::ostringstream s;
  s << "model:      " << j["file"].get<std::string>() << "\n";
  s << "producer:   " << j["producer"].get<std::string>() << ", IR version " << j["ir_version"] << "\n";
  s << "opsets:    ";
  for (const auto& [d, v] : j["opsets"].items()) s << " " << d << " " << v;
  s << "\n";
  for (const char* side : {"inputs", "outputs"}) {
    s << side << ":" << std::string(11 - std::string(side).size() - 1, ' ');
    bool first = true;
    for (const auto& v : j[side]) {
      s << (first ? " " : "            ") << v["name"].get<std::string>() << ": " << v["type"].get<std::string>() << "\n";
      first = false;
    }
    if (first) s << " (none)\n";
  }
  s << "nodes:      " << j["nodes"] << " (" << j["casts"] << " Cast)\n";
  s << "ops:       ";
  for (const auto& [op, n] : j["ops"].items()) s << " " << op << "=" << n;
  s << "\n";
  if (const auto& a = j["attention_chains"]; a["total"].get<int64_t>() > 0)
    s << "attention:  " << a["total"] << " MatMul-Softmax-MatMul chains that amp-train fuses into one ai.onnx_amp "
      << "Attention each (" << a["causal"] << " causal, " << a["masked"] << " with a mask input)\n";
  s << "parameters: " << j["parameters"] << " (" << human_bytes(j["parameter_bytes"].get<int64_t>()) << ")";
  for (const auto& [d, cb] : j["parameters_by_dtype"].items())
    s << "; " << d << " " << cb["count"] << " (" << human_bytes(cb["bytes"].get<int64_t>()) << ")";
  s << "\n";
  if (!j["node_precisions"].empty()) {
    s << "precision: ";
    for (const auto& [p, n] : j["node_precisions"].items()) s << " " << p << "=" << n;
    s << " nodes\n";
  }
  if (j.contains("training_info"))
    for (const auto& t : j["training_info"])
      s << "training:   algorithm " << t["algorithm_nodes"] << " nodes, " << t["update_bindings"]
        << " state updates\n";
  return s.str();
}

}  // namespace amp
