// amp-inspect MODEL [--nodes] [--json] [--dot FILE] [--html FILE] [--explain NODE] [--cuda-plan --dim N=32]:
// what a model is, what a rewrite did to it, and what the cuda backend would run for it.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <unordered_map>

#include "frontends/lib/cuda_plan_report.h"
#include "frontends/lib/dot_writer.h"
#include "frontends/lib/html_page.h"
#include "frontends/lib/model_summary.h"
#include "frontends/lib/tool_main.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/onnx_io.h"
#include "passes/amp/decision_record.h"

namespace amp {

static std::string io_list(const std::vector<Value*>& values) {
  std::string s;
  for (const Value* v : values) {
    if (!s.empty()) s += ", ";
    s += v ? v->name() + ":" + v->type().str() : "<absent>";
  }
  return s;
}

// "rule: reason" of the rewrite's decision for n (and "; measured: k=v, ..." after a calibration
// rule), "" when the model was not rewritten.
static std::string decision_text(const Node& n) {
  auto r = read_decision_record(n);
  if (!r) return "";
  std::string text = r->rule + ": " + r->reason, measured;
  for (const auto& [name, value] : r->fields)
    if (name != kRecordFieldFrom) measured += (measured.empty() ? "; measured: " : ", ") + name + "=" + value;
  return text + measured;
}

static void print_nodes(const Graph& g) {
  size_t k = 0;
  for (const Node* n : g.nodes()) {
    std::string prec = node_precision(*n);
    std::printf("%4zu  %-28s %-20s %-9s (%s) -> (%s)\n", k++, n->name.empty() ? "-" : n->name.c_str(),
                n->op_type().c_str(), prec.empty() ? "-" : prec.c_str(), io_list(n->inputs()).c_str(),
                io_list(n->outputs()).c_str());
    std::string why = decision_text(*n);
    if (!why.empty()) std::printf("      why: %s\n", why.c_str());
  }
}

// The chain of reasons behind each named node's precision, read from the model's decision records
// (a saved training step's in its inference and algorithm graphs), as amp-rewrite --explain printed
// it when it wrote the model.
static void print_explanations(const Model& m, const std::vector<std::string>& names) {
  std::vector<const Graph*> graphs = {m.graph.get()};
  for (const TrainingInfo& t : m.training_info)
    if (t.algorithm) graphs.push_back(t.algorithm.get());
  const AmpDecisions recorded = recorded_decisions(graphs);
  if (recorded.nodes.empty())
    throw InputError(m.path + ": --explain: the model has no decision records (written neither by amp-rewrite nor by "
                              "amp-train --dtype fp16|bf16)");
  std::unordered_map<std::string, const Node*> by_name;  // names, and node_ref() for unnamed nodes
  for (const Graph* g : graphs)
    for (const Node* n : g->nodes()) by_name.emplace(n->name.empty() ? node_ref(n) : n->name, n);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = by_name.find(names[i]);
    if (it == by_name.end()) throw InputError(m.path + ": --explain: no node named '" + names[i] + "'");
    const Node* found = it->second;
    if (i) std::cout << "\n";
    for (const std::string& line : explain_recorded(recorded, *found)) std::cout << line << "\n";
  }
}

static int inspect(const std::string& path, bool nodes, bool json, const std::string& dot, const std::string& html,
                   const std::vector<std::string>& explain, bool cuda_plan, const std::vector<std::string>& dim_args) {
  std::map<std::string, int64_t> dims;
  for (const std::string& a : dim_args) dims.insert(parse_dim_assignment(a));
  LoadOptions options;
  // Show the model as it is, not as the rewrite would see it; but plan it as amp-run --device cuda
  // would run it: converted to opset 17 on load (ONNX Runtime's opset-12 LayerNormalization, say,
  // is then read as what it means), so the plan is of what would run.
  if (!cuda_plan) options.target_opset = 0;
  Model m = load_model(path, options);
  if (!html.empty()) {
    const auto dir = std::filesystem::absolute(html).parent_path();
    if (!std::filesystem::is_directory(dir)) throw InputError(html + ": no such directory '" + dir.string() + "'");
    write_html_page(html, m, {path, nullptr});
  }
  if (!explain.empty()) {
    print_explanations(m, explain);
    return kExitOk;
  }
  if (!html.empty() && !nodes && !json && dot.empty() && !cuda_plan) return kExitOk;
  auto summary = summarize(m);
  if (const std::string* settings = m.metadata(kRewriteSettingsKey)) {
    std::map<std::string, int64_t> rules;
    for (const Node* n : m.graph->nodes())
      if (auto r = read_decision_record(*n)) ++rules[r->precision + " " + r->rule];
    summary["rewrite"] = {{"settings", *settings}, {"decisions", rules}};
  }
  if (cuda_plan) {
    nlohmann::ordered_json plan = cuda_plan_report(m, dims);
    if (json) {
      summary["cuda_plan"] = std::move(plan);
    } else {
      std::cout << cuda_plan_text(plan);
      return kExitOk;
    }
  }
  if (json)
    std::cout << summary.dump(2) << "\n";
  else
    std::cout << summary_text(summary);
  if (!json && summary.contains("rewrite")) {
    std::cout << "rewrite:    " << summary["rewrite"]["settings"].get<std::string>() << "\n";
    for (const auto& [rule, count] : summary["rewrite"]["decisions"].items())
      std::cout << "            " << count << " nodes " << rule << "\n";
  }
  if (nodes && !json) print_nodes(*m.graph);
  if (!dot.empty()) {
    const std::string text = graph_to_dot(*m.graph, decision_text);
    AtomicFile out(dot);
    out.write(text.data(), text.size());
    out.commit();
  }
  return kExitOk;
}

}  // namespace amp

int main(int argc, char** argv) {
  CLI::App app{"Show an ONNX model: summary, per-node precision, a picture of the graph.", "amp-inspect"};
  std::string model, dot, html;
  std::vector<std::string> explain;
  bool nodes = false, json = false;
  app.add_option("model", model, "the .onnx file")->required();
  app.add_flag("--nodes", nodes, "one line per node: name, op, precision, inputs and outputs with types");
  app.add_flag("--json", json, "the summary as JSON on stdout");
  app.add_option("--dot", dot, "write a Graphviz DOT picture, nodes coloured by precision");
  app.add_option("--html", html,
                 "write one self-contained HTML page: the graph by scope (Graphviz layout), each node's precision and "
                 "the reasons for it, a summary; opens offline in any browser");
  app.add_option("--explain", explain,
                 "print the chain of reasons behind a node's precision, from the model's decision records (repeatable)")
      ->allow_extra_args(false);
  bool cuda_plan = false;
  std::vector<std::string> dims;
  app.add_flag("--cuda-plan", cuda_plan,
               "what the cuda backend would run (device units in order, fused kernels, views, planned memory), "
               "worked out without a GPU, of the model as amp-run loads it (converted to opset 17); a training step "
               "saved by amp-train is planned whole");
  app.add_option("--dim", dims, "NAME=VALUE for a symbolic input dim, for --cuda-plan (e.g. --dim N=32 --dim T=128)");
  return amp::tool_main(app, argc, argv, [&] { return amp::inspect(model, nodes, json, dot, html, explain, cuda_plan, dims); });
}
