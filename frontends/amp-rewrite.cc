// amp-rewrite MODEL [-o OUT]: rewrites an ONNX model to mixed precision (fp16 or bf16) with Casts at
// few boundaries, explains every decision, and writes a model that passes ONNX's checker.
#include <filesystem>
#include <iostream>
#include <set>

#include "backends/backend.h"
#include "frontends/lib/amp_config.h"
#include "frontends/lib/calibrate.h"
#include "frontends/lib/html_page.h"
#include "frontends/lib/npz.h"
#include "frontends/lib/rewrite_report.h"
#include "frontends/lib/tool_main.h"
#include "graph/amp_ops.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/external_data.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"
#include "passes/pipelines.h"

namespace amp {

namespace {

struct Options {
  std::string model, output, dtype, weights, config, report, html;
  std::vector<std::string> explain;
  bool keep_io = false, no_keep_io = false, verify_each = false, force = false;
  std::string calibrate, metric = "max-relative";
  double max_error = -1;  // < 0: the floor
  bool write_unmet = false;
  std::vector<std::string> allow, deny, infer, clear, block;
};

AmpPolicy make_policy(const Options& o) {
  AmpConfig config;
  if (!o.config.empty()) config = read_amp_config(o.config);
  AmpPolicy policy(o.dtype.empty() ? config.dtype.value_or(DType::kFloat16) : parse_amp_dtype(o.dtype));
  policy.keep_io_types = o.keep_io ? true : o.no_keep_io ? false : config.keep_io_types.value_or(true);
  policy.weights = o.weights.empty() ? config.weights.value_or(WeightStorage::kKeep) : parse_weight_storage(o.weights);
  OpListEdits flags{{{OpCategory::kAllow, o.allow}, {OpCategory::kDeny, o.deny}, {OpCategory::kInfer, o.infer},
                     {OpCategory::kClear, o.clear}},
                    "command line"};
  policy.apply({config.lists, flags});
  for (const auto& p : config.block_nodes) policy.block_nodes(p);
  for (const auto& p : o.block) policy.block_nodes(p);
  return policy;
}

// Weights stay beside the model when they came that way, or when they would pass protobuf's 2 GB.
SaveOptions save_options(const Model& m) {
  size_t bytes = 0;
  bool external = false;
  for (const Value* v : m.graph->initializers()) {
    bytes += v->initializer().nbytes();
    external = external || v->initializer().external.has_value();
  }
  SaveOptions options;
  if (external || bytes > (size_t{3} << 29)) options.external_threshold = 1024;  // onnx's own default threshold
  return options;
}

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

int rewrite(const Options& o) {
  AmpPolicy policy = make_policy(o);
  const std::string output = o.output.empty() ? default_output(o.model, policy.target()) : o.output;
  check_overwrite(o, output);
  for (const std::string& out : {output, o.report, o.html}) {
    if (out.empty()) continue;
    const auto dir = std::filesystem::absolute(out).parent_path();
    if (!std::filesystem::is_directory(dir)) throw InputError(out + ": no such directory '" + dir.string() + "'");
  }
  Model m = load_model(o.model);
  if (!m.training_info.empty())
    throw InputError(o.model + ": has training_info; amp-rewrite rewrites inference graphs (amp-train rewrites "
                               "training steps)");
  for (const std::string& name : o.explain)
    if (!has_node_named(*m.graph, name)) throw InputError(o.model + ": --explain: no node named '" + name + "'");
  // --calibrate: the nodes that break accuracy on the data are kept fp32 (calibrate.h), then the
  // rewrite runs as always with them in the policy.
  std::optional<CalibrationResult> calibration;
  if (!o.calibrate.empty()) {
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
  RewriteFacts facts{o.model, output, "", count_casts(m), 0, activation_bytes(m), 0};
  AmpResult result;
  PassManager pm = amp_rewrite_pipeline(policy, result, o.verify_each);
  pm.run(m);
  verify_or_throw(m);
  facts.casts_after = count_casts(m);
  facts.activation_bytes_after = activation_bytes(m);
  const SaveOptions saving = save_options(m);
  save_model(m, output, saving);
  if (saving.external_threshold > 0 && std::filesystem::exists(external_data_path(output)))
    facts.external_data_path = external_data_path(output);

  auto report = rewrite_report(facts, policy, result, pm.runs());
  std::cerr << rewrite_summary_text(report);
  if (calibration) {
    report["calibration"] = calibration_json(*calibration);
    std::cerr << calibration_summary_text(*calibration);
    if (calibration->below_floor) std::cerr << "  calibration: warning: " << calibration_floor_text(*calibration) << "\n";
  }
  // An op amp-run cannot run does not stop a rewrite (its output is valid ONNX for other runtimes),
  // but it is never silent: one line per op type, naming the file and the first such node.
  {
    const std::unique_ptr<Backend> cpu = make_backend("cpu");
    std::set<std::string> seen;
    for (const Node* n : m.graph->nodes()) {
      if (n->domain() == kAmpDomain || seen.count(n->qualified_op_type())) continue;
      const std::string why = cpu->unsupported_reason(*n);
      if (why.empty()) continue;
      seen.insert(n->qualified_op_type());
      std::cerr << "  warning: " << o.model << ": node " << n->label() << ": " << why
                << " (amp-run and amp-train cannot run this model; the rewrite is valid ONNX for other runtimes)\n";
    }
  }
  if (!o.report.empty()) {
    const std::string text = report.dump(2) + "\n";
    AtomicFile out(o.report);
    out.write(text.data(), text.size());
    out.commit();
  }
  if (!o.html.empty()) write_html_page(o.html, m, {output, &report});
  for (size_t i = 0; i < o.explain.size(); ++i) {
    if (i) std::cout << "\n";
    const NodeDecision* nd = result.decisions.find(o.explain[i]);
    if (!nd) std::cout << o.explain[i] << ": removed by cast-cleanup before colouring (a Cast that changed nothing)\n";
    if (nd)
      for (const std::string& line : explain(result.decisions, *nd)) std::cout << line << "\n";
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
  app.add_option("--dtype", o.dtype, "low-precision type: fp16 (default) or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  auto* keep = app.add_flag("--keep-io-types", o.keep_io, "graph inputs and outputs keep their types (default)");
  app.add_flag("--no-keep-io-types", o.no_keep_io, "graph inputs and outputs may become low precision")->excludes(keep);
  app.add_option("--allow", o.allow, "ops to run in low precision (comma-separated); -OP takes one off the list")->delimiter(',');
  app.add_option("--deny", o.deny, "ops to keep in fp32, painting fp32 downstream; -OP takes one off")->delimiter(',');
  app.add_option("--infer", o.infer, "ops that follow their neighbours; -OP takes one off")->delimiter(',');
  app.add_option("--clear", o.clear, "data-movement ops that take the precision next to them; -OP takes one off")
      ->delimiter(',');
  app.add_option("--block-node", o.block, "keep nodes whose name matches this regex in fp32 (repeatable)");
  app.add_option("--config", o.config, "JSON file with the same settings (see frontends/lib/amp_config.h)");
  app.add_option("--weights", o.weights, "keep: fp32 weights cast at use (default); lowp: stored in low precision")
      ->check(CLI::IsMember({"keep", "lowp"}));
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
  app.add_flag("--verify-each", o.verify_each, "check the graph after every pass and name the pass that broke it");
  return amp::tool_main(app, argc, argv, [&] { return amp::rewrite(o); });
}
