// amp-rewrite MODEL [-o OUT]: rewrites an ONNX model to mixed precision (fp16 or bf16) with Casts at
// few boundaries, explains every decision, and writes a model that passes ONNX's checker.
#include <filesystem>
#include <iostream>
#include <optional>

#include "frontends/lib/calibrate.h"
#include "frontends/lib/html_page.h"
#include "frontends/lib/model_rewrite.h"
#include "frontends/lib/npz.h"
#include "frontends/lib/rewrite_report.h"
#include "frontends/lib/tool_main.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/external_data.h"
#include "graph/onnx_io.h"

namespace amp {

namespace {

struct Options {
  std::string model, output, report, html;
  std::vector<std::string> explain;
  bool keep_io = false, no_keep_io = false, force = false;
  RewriteSettings settings;
  std::string calibrate, metric = "max-relative";
  double max_error = -1;  // < 0: the default E
  bool write_unmet = false;
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
  AmpPolicy policy = make_rewrite_policy(o.settings);
  const std::string output = o.output.empty() ? default_output(o.model, policy.target()) : o.output;
  check_overwrite(o, output);
  for (const std::string& out : {output, o.report, o.html}) {
    if (out.empty()) continue;
    const auto dir = std::filesystem::absolute(out).parent_path();
    if (!std::filesystem::is_directory(dir)) throw InputError(out + ": no such directory '" + dir.string() + "'");
  }
  Model m = load_model(o.model);
  for (const std::string& name : o.explain)
    if (!has_node_named(*m.graph, name)) throw InputError(o.model + ": --explain: no node named '" + name + "'");
  // --calibrate: the nodes that break accuracy on the data are kept fp32 (calibrate.h), then the
  // rewrite runs as always with them in the policy.
  std::optional<CalibrationResult> calibration;
  if (!o.calibrate.empty() && m.training_info.empty()) {  // a training step is refused by rewrite_model
    CalibrationOptions options;
    options.metric = parse_calibration_metric(o.metric);
    if (o.max_error >= 0) options.max_error = o.max_error;
    calibration = calibrate(m, read_npz(o.calibrate), policy, options, o.calibrate);
    if (calibration->below_floor && !o.write_unmet) {
      std::cerr << "amp-rewrite: " << o.model << ": " << calibration_floor_text(*calibration)
                << ". Nothing written (--write-unmet writes that placement).\n";
      return kExitBadInput;
    }
    calibration->apply(policy);
  }
  const RewrittenModel r = rewrite_model(std::move(m), policy, o.model, o.settings.verify_each);
  const std::string external_data = save_rewrite(r, output);
  auto report = rewrite_report_of(r, o.model, output, external_data);
  std::cerr << rewrite_summary_text(report);
  if (calibration) {
    report["calibration"] = calibration_json(*calibration);
    std::cerr << calibration_summary_text(*calibration);
    if (calibration->below_floor) std::cerr << "  calibration: warning: " << calibration_floor_text(*calibration) << "\n";
  }
  for (const std::string& w : r.warnings) std::cerr << "  warning: " << w << "\n";
  if (!o.report.empty()) {
    const std::string text = report.dump(2) + "\n";
    AtomicFile out(o.report);
    out.write(text.data(), text.size());
    out.commit();
  }
  if (!o.html.empty()) write_html_page(o.html, r.model, {output, &report});
  for (size_t i = 0; i < o.explain.size(); ++i) {
    if (i) std::cout << "\n";
    const NodeDecision* nd = r.result.decisions.find(o.explain[i]);
    if (!nd) std::cout << o.explain[i] << ": removed by cast-cleanup before colouring (a Cast that changed nothing)\n";
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
  app.add_option("--cast-placement", o.settings.cast_placement,
                 "compute (default): data movement (Transpose, Reshape...) next to an fp32 op runs in fp32, so each "
                 "Cast sits beside an op that computes and ONNX Runtime's CPU provider removes it; consumer: Casts at "
                 "the consuming op, as autocast (data movement in 16 bits)")
      ->check(CLI::IsMember({"compute", "consumer"}));
  app.add_option("--min-magnitude", o.settings.min_magnitude,
                 "non-zero constants stored in low precision with a smaller magnitude become +-X (onnxconverter-common's "
                 "min_positive_val: an epsilon does not flush to zero); default 0: round as IEEE does");
  app.add_option("--report", o.report, "write every node's precision and reason, casts, clamps as JSON");
  app.add_option("--explain", o.explain,
                 "print the chain of reasons behind a node's precision (repeatable; a blank line between nodes)")
      ->allow_extra_args(false);
  app.add_option("--html", o.html,
                 "write one self-contained HTML page of the rewritten model: the graph by scope, each node's "
                 "precision and reasons, a summary (opens offline in any browser)");
  app.add_option("--calibrate", o.calibrate,
                 "an .npz of inputs (keys = graph inputs): keep in fp32 the fewest nodes, cheapest first, that bring "
                 "every output within --max-error on them (measured on the CPU backend's GPU-faithful 16-bit math)");
  app.add_option("--max-error", o.max_error,
                 "with --calibrate: largest error allowed per output, relative to max |fp32| (or top-1 disagreement "
                 "with --metric top1); default: twice the floor, the error with only inputs and weights rounded")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--metric", o.metric, "with --calibrate: max-relative (default) or top1")
      ->check(CLI::IsMember({"max-relative", "top1"}));
  app.add_flag("--write-unmet", o.write_unmet,
               "with --calibrate: write the rewrite calibrated for the floor when --max-error is below it (default: "
               "say so and write nothing)");
  app.add_flag("--verify-each", o.settings.verify_each, "check the graph after every pass and name the pass that broke it");
  return amp::tool_main(app, argc, argv, [&] { return amp::rewrite(o); });
}
