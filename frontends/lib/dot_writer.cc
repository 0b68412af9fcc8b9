#include "frontends/lib/dot_writer.h"

#include <sstream>
#include <unordered_map>

#include "frontends/lib/model_summary.h"

namespace amp {

static std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

static const char* fill_for(const std::string& precision) {
  if (precision == "float") return "#9ecae1";
  if (precision == "float16") return "#fdae6b";
  if (precision == "bfloat16") return "#bcbddc";
  if (precision == "double") return "#d9d9d9";
  return "#ffffff";
}

std::string graph_to_dot(const Graph& g, const std::function<std::string(const Node&)>& tooltip) {
  std::ostringstream s;
  s << "digraph " << quote(g.name.empty() ? "graph" : g.name) << " {\n";
  s << "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10, style=filled];\n"
       "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  std::unordered_map<const Node*, std::string> id;
  size_t k = 0;
  for (const Node* n : g.nodes()) id[n] = "n" + std::to_string(k++);
  std::unordered_map<const Value*, std::string> source;  // graph inputs get their own ellipse
  size_t i = 0;
  for (const Value* v : g.inputs()) {
    if (v->has_initializer()) continue;
    std::string vid = "in" + std::to_string(i++);
    source[v] = vid;
    s << "  " << vid << " [shape=ellipse, fillcolor=" << quote(fill_for(std::string(dtype_name(v->dtype()))))
      << ", label=" << quote(v->name() + "\n" + v->type().str()) << "];\n";
  }
  for (const Node* n : g.nodes()) {
    const std::string prec = node_precision(*n);
    std::string label = n->op_type() + (n->name.empty() ? "" : "\n" + n->name);
    s << "  " << id[n] << " [shape=" << (n->op_type() == "Cast" ? "diamond" : "box")
      << ", fillcolor=" << quote(fill_for(prec)) << ", label=" << quote(label);
    std::string tip = prec.empty() ? "" : prec;
    if (tooltip) {
      std::string extra = tooltip(*n);
      if (!extra.empty()) tip += (tip.empty() ? "" : ": ") + extra;
    }
    if (!tip.empty()) s << ", tooltip=" << quote(tip);
    s << "];\n";
  }
  auto edge = [&](const Value* v, const std::string& to) {
    std::string from;
    if (v->producer() && id.count(v->producer()))
      from = id[v->producer()];
    else if (source.count(v))
      from = source[v];
    else
      return;  // initializers and outer-scope values are not drawn
    s << "  " << from << " -> " << to << " [label=" << quote(v->type().str()) << "];\n";
  };
  for (const Node* n : g.nodes())
    for (const Value* v : n->inputs())
      if (v) edge(v, id[n]);
  size_t o = 0;
  for (const Value* v : g.outputs()) {
    std::string vid = "out" + std::to_string(o++);
    s << "  " << vid << " [shape=ellipse, fillcolor=" << quote(fill_for(std::string(dtype_name(v->dtype()))))
      << ", label=" << quote(v->name() + "\n" + v->type().str()) << "];\n";
    edge(v, vid);
  }
  s << "  subgraph cluster_legend { label=\"precision\"; fontsize=9; "
       "l32 [label=\"fp32\", fillcolor=\"#9ecae1\"]; l16 [label=\"fp16\", fillcolor=\"#fdae6b\"]; "
       "lbf [label=\"bf16\", fillcolor=\"#bcbddc\"]; lnf [label=\"non-float\", fillcolor=\"#ffffff\"]; }\n";
  s << "}\n";
  return s.str();
}

}  // namespace amp
