// amp-rewrite MODEL [-o OUT]: rewrites an ONNX model to mixed precision (fp16 or bf16) with Casts at
// few boundaries, explains every decision, and writes a model that passes ONNX's checker.
#include <filesystem>
#include <iostream>

#include "frontends/lib/model_rewrite.h"
#include "frontends/lib/rewrite_report.h"
#include "frontends/lib/tool_main.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/external_data.h"
#include "graph/onnx_io.h"

namespace amp {

namespace {

struct Options {
  std::string model, output, report, explain;
  bool keep_io = false, no_keep_io = false, force = false;
  RewriteSettings settings;
};

bool has_node_named(const Graph& g, const std::string& name) {
  for (const Node* n : g.nodes()) {
    if (n->name == name) return true;
    for (const Graph* sub : n->subgraphs())
      if (has_node_named(*sub, name)) return true;
  }
  return false;
}

// Without -o the rewrite lands beside the input: model.onnx -> model.amp.onnx, or model.amp-bf16.onnx
// for bf16, so the fp16 and bf16 rewrites of one model can sit side by side.
std::string default_output(const std::string& model, DType target) {
  const std::string suffix = ".onnx";
  std::string stem = model;
  if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem + (target == DType::kBFloat16 ? ".amp-bf16.onnx" : ".amp.onnx");
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

// The input is never replaced (the rewrite of it could not be redone with other settings); a
// file the user did not name is replaced only with --force.
void check_overwrite(const Options& o, const std::string& output) {
  if (same_file(o.model, output)) throw InputError(output + ": is the input model; write the rewrite elsewhere (-o)");
  if (!o.output.empty() || o.force) return;
  for (const std::string& path : {output, external_data_path(output)})
    if (std::filesystem::exists(path))
      throw InputError(path + ": exists; --force replaces it, -o writes elsewhere");
}

int rewrite(Options o) {
  if (o.keep_io) o.settings.keep_io_types = true;
  if (o.no_keep_io) o.settings.keep_io_types = false;
  const AmpPolicy policy = make_rewrite_policy(o.settings);
  const std::string output = o.output.empty() ? default_output(o.model, policy.target()) : o.output;
  check_overwrite(o, output);
  for (const std::string& out : {output, o.report}) {
    if (out.empty()) continue;
    const auto dir = std::filesystem::absolute(out).parent_path();
    if (!std::filesystem::is_directory(dir)) throw InputError(out + ": no such directory '" + dir.string() + "'");
  }
  Model m = load_model(o.model);
  if (!o.explain.empty() && !has_node_named(*m.graph, o.explain))
    throw InputError(o.model + ": --explain: no node named '" + o.explain + "'");
  const RewrittenModel r = rewrite_model(std::move(m), policy, o.model, o.settings.verify_each);
  const std::string external_data = save_rewrite(r, output);
  const auto report = rewrite_report_of(r, o.model, output, external_data);
  std::cerr << rewrite_summary_text(report);
  for (const std::string& w : r.warnings) std::cerr << "  warning: " << w << "\n";
  if (!o.report.empty()) {
    const std::string text = report.dump(2) + "\n";
    AtomicFile out(o.report);
    out.write(text.data(), text.size());
    out.commit();
  }
  if (!o.explain.empty()) {
    const NodeDecision* nd = r.result.decisions.find(o.explain);
    if (!nd) std::cout << o.explain << ": removed by cast-cleanup before colouring (a Cast that changed nothing)\n";
    if (nd)
      for (const std::string& line : explain(r.result.decisions, *nd)) std::cout << line << "\n";
  }
  return kExitOk;
}

}  // namespace

}  // namespace amp

int main(int argc, char** argv) {
  CLI::App app{"Rewrite an ONNX model to mixed precision (fp16 or bf16), explaining every decision.", "amp-rewrite"};
  amp::Options o;
  app.add_option("model", o.model, "the .onnx file to rewrite")->required();
  app.add_option("-o,--output", o.output,
                 "where to write the rewritten model (default: beside MODEL as NAME.amp.onnx, or NAME.amp-bf16.onnx "
                 "for bf16; an existing file there is kept unless --force)");
  app.add_flag("--force", o.force,
               "replace an existing NAME.amp.onnx (written atomically: a failed run keeps the old one)");
  app.add_option("--dtype", o.settings.dtype, "low-precision type: fp16 (default) or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  auto* keep = app.add_flag("--keep-io-types", o.keep_io, "graph inputs and outputs keep their types (default)");
  app.add_flag("--no-keep-io-types", o.no_keep_io, "graph inputs and outputs may become low precision")->excludes(keep);
  app.add_option("--allow", o.settings.allow, "ops to run in low precision (comma-separated); -OP takes one off the list")->delimiter(',');
  app.add_option("--deny", o.settings.deny, "ops to keep in fp32, painting fp32 downstream; -OP takes one off")->delimiter(',');
  app.add_option("--infer", o.settings.infer, "ops that follow their neighbours; -OP takes one off")->delimiter(',');
  app.add_option("--clear", o.settings.clear, "data-movement ops that take the precision next to them; -OP takes one off")
      ->delimiter(',');
  app.add_option("--block-node", o.settings.block, "keep nodes whose name matches this regex in fp32 (repeatable)");
  app.add_option("--config", o.settings.config, "JSON file with the same settings (see frontends/lib/amp_config.h)");
  app.add_option("--weights", o.settings.weights, "keep: fp32 weights cast at use (default); lowp: stored in low precision")
      ->check(CLI::IsMember({"keep", "lowp"}));
  app.add_option("--report", o.report, "write every node's precision and reason, casts, clamps as JSON");
  app.add_option("--explain", o.explain, "print the chain of reasons behind one node's precision");
  app.add_flag("--verify-each", o.settings.verify_each, "check the graph after every pass and name the pass that broke it");
  return amp::tool_main(app, argc, argv, [&] { return amp::rewrite(o); });
}
