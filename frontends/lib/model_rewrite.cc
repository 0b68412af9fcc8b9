#include "frontends/lib/model_rewrite.h"

#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "backends/backend.h"
#include "frontends/lib/amp_config.h"
#include "frontends/lib/rewrite_report.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/external_data.h"
#include "graph/onnx_io.h"
#include "graph/onnx_newer_opsets.h"
#include "graph/onnx_strict_inference.h"
#include "graph/verify.h"
#include "passes/autodiff/complete_shapes.h"
#include "passes/pipelines.h"

namespace amp {

namespace {

// A node name as a pattern that matches it alone (std::regex ECMAScript).
std::string exact_pattern(const std::string& name) {
  static const std::string special = "\\^$.|?*+()[]{}";
  std::string out;
  for (char c : name) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// A node of an op that opsets 18+ added with no opset-17 form, which the import carried into
// ai.onnx_amp (graph/onnx_newer_opsets.h); nullptr when there is none. amp-rewrite writes opset-17
// models, which ONNX 1.12's checker checks and which cannot hold it.
const Node* carried_newer_op(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (is_carried_newer_op(n->domain(), n->op_type())) return n;
    for (const Graph* sub : n->subgraphs())
      if (const Node* found = carried_newer_op(*sub)) return found;
  }
  return nullptr;
}

bool uses_domain(const Graph& g, const std::string& domain) {
  for (const Node* n : g.nodes()) {
    if (n->domain() == domain) return true;
    for (const Graph* sub : n->subgraphs())
      if (uses_domain(*sub, domain)) return true;
  }
  return false;
}

// The import carries the ops opset 17 has no node for (bitwise, Col2Im, DeformConv, the scatters'
// max / min) into ai.onnx_amp, where amp-run's kernels run them; a rewrite is written as opset 17,
// where expand_carried_ops writes those it can as opset-17 ops that compute the same. Their inputs'
// types and shapes are declared for it (value_info).
Model carried_as_opset_17(Model& m, const std::string& model_path) {
  std::function<void(Graph&)> declare = [&](Graph& g) {
    for (Node* n : g.nodes()) {
      if (is_carried_newer_op(n->domain(), n->op_type()))
        for (Value* v : n->inputs())
          if (v && v->graph() == &g && v->type().is_tensor() && !v->is_input() && !v->has_initializer() &&
              std::find(g.value_info().begin(), g.value_info().end(), v) == g.value_info().end())
            g.value_info().push_back(v);
      for (Graph* sub : n->subgraphs()) declare(*sub);
    }
  };
  declare(*m.graph);
  onnx::ModelProto p = to_proto(m);
  const int count = expand_carried_ops(p, model_path);
  if (count == 0) return std::move(m);  // shapes computed at run time: refused below
  Model out = from_proto(p, model_path, std::filesystem::path(model_path).parent_path().string());
  if (!uses_domain(*out.graph, kAmpDomain))
    out.opset_imports.erase(std::remove_if(out.opset_imports.begin(), out.opset_imports.end(),
                                           [](const OpsetImport& o) { return o.domain == kAmpDomain; }),
                            out.opset_imports.end());
  spdlog::info("{}: {} node{} of opset 18 (bitwise, Col2Im, scatter max / min) written as the opset-17 ops that compute {}", model_path,
               count, count == 1 ? "" : "s", count == 1 ? "it" : "them");
  return out;
}

}  // namespace

AmpPolicy make_rewrite_policy(const RewriteSettings& s) {
  AmpConfig config;
  if (!s.config.empty()) config = read_amp_config(s.config);
  AmpPolicy policy(s.dtype.empty() ? config.dtype.value_or(DType::kFloat16) : parse_amp_dtype(s.dtype));
  policy.keep_io_types = s.keep_io_types.value_or(config.keep_io_types.value_or(true));
  policy.weights = s.weights.empty() ? config.weights.value_or(WeightStorage::kKeep) : parse_weight_storage(s.weights);
  // Casts beside the ops that compute: the rewrite's models go to runtimes (ONNX Runtime's CPU
  // provider) that compute fp16 ops in fp32 and remove the Cast pairs between them (amp_policy.h).
  policy.cast_placement = s.cast_placement.empty() ? config.cast_placement.value_or(CastPlacement::kCompute)
                                                   : parse_cast_placement(s.cast_placement);
  const double min_magnitude = s.min_magnitude.value_or(config.min_magnitude.value_or(0.0));
  if (!(min_magnitude >= 0 && min_magnitude <= 1))  // NaN fails too
    throw InputError("min_magnitude " + std::to_string(min_magnitude) + ": must be from 0 to 1");
  policy.min_magnitude = static_cast<float>(min_magnitude);
  OpListEdits flags{{{OpCategory::kAllow, s.allow}, {OpCategory::kDeny, s.deny}, {OpCategory::kInfer, s.infer},
                     {OpCategory::kClear, s.clear}},
                    s.edits_source};
  for (const std::string& op : s.block_ops)
    if (const OpListEntry* e = policy.entry("", op)) flags.edits[e->category].push_back("-" + op);
  policy.apply({config.lists, flags});
  for (const auto& p : config.block_nodes) policy.block_nodes(p);
  for (const auto& p : s.block) policy.block_nodes(p);
  for (const auto& name : s.block_names) policy.block_nodes(exact_pattern(name));
  return policy;
}

RewrittenModel rewrite_model(Model m, const AmpPolicy& policy, const std::string& model_path, bool verify_each) {
  if (!m.training_info.empty())
    throw InputError(model_path + ": has training_info; amp-rewrite rewrites inference graphs (amp-train rewrites "
                                  "training steps)");
  if (carried_newer_op(*m.graph)) m = carried_as_opset_17(m, model_path);
  if (const Node* n = carried_newer_op(*m.graph))
    throw InputError(model_path + ": node " + n->label() + ": " +
                     (n->op_type().rfind("Scatter", 0) == 0 ? "reduction '" + n->attr_string("reduction", "") + "'"
                                                            : n->op_type()) +
                     " came after opset 17 and has no opset-17 form; amp-rewrite writes opset-17 models (amp-run and "
                     "amp-train run this one)");
  // A model its own op schemas reject (ONNX Runtime: "This is an invalid model. Type Error") is the
  // input's fault, said as such, before any pass runs: after the passes it would read as ours.
  if (const std::vector<std::string> problems = verify(m); !problems.empty())
    throw InputError(model_path + ": invalid model: " + problems[0] +
                     (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : std::string()));
  // The import infers shapes leniently; ONNX's strict inference, which the full checker runs, may
  // still fail on the input (ONNX Runtime refuses such models). Judged after the passes: a rewrite
  // that passes is written; one that fails is the input's fault when the input fails too (the
  // input's inference runs only then, on its form kept here).
  onnx::ModelProto input_shapes = to_shape_proto(m);
  // A graph output ONNX's inference leaves without a rank (a Reshape to a computed shape upstream,
  // as in opset 21's GroupNormalization body) cannot be written: the full checker requires a shape
  // on every graph output. The shape rules fill in what follows from the inputs (ranks through such
  // Reshapes, dims from Shape nodes); known types are never changed.
  for (const Value* v : m.graph->outputs())
    if (v->type().is_tensor() && !v->type().shape) {
      complete_shapes(*m.graph);
      break;
    }
  RewrittenModel r{std::move(m), policy, {}, {}, 0, 0, {}};
  r.casts_before = count_casts(r.model);
  r.activation_bytes_before = activation_bytes(r.model);
  PassManager pm = amp_rewrite_pipeline(r.policy, r.result, verify_each);
  pm.run(r.model);
  verify_or_throw(r.model);
  if (const std::string output_inference = strict_inference_error(r.model); !output_inference.empty()) {
    if (const std::string input_inference = strict_inference_error(std::move(input_shapes)); !input_inference.empty())
      throw InputError(model_path + ": invalid model: ONNX's shape inference (strict, as its full check runs it) fails on it: " +
                       input_inference);
    throw Error(model_path + ": the rewrite fails ONNX's strict shape inference, which the input passes: " +
                output_inference);
  }
  r.passes = pm.runs();
  // An op amp-run cannot run does not stop a rewrite (its output is valid ONNX for other runtimes),
  // but it is never silent: one line per op type, naming the file and the first such node.
  const std::unique_ptr<Backend> cpu = make_backend("cpu");
  std::set<std::string> seen;
  for (const Node* n : r.model.graph->nodes()) {
    if (n->domain() == kAmpDomain || seen.count(n->qualified_op_type())) continue;
    const std::string why = cpu->unsupported_reason(*n);
    if (why.empty()) continue;
    seen.insert(n->qualified_op_type());
    r.warnings.push_back(model_path + ": node " + n->label() + ": " + why +
                         " (amp-run and amp-train cannot run this model; the rewrite is valid ONNX for other runtimes)");
  }
  return r;
}

SaveOptions rewrite_save_options(const Model& m) {
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

std::string save_rewrite(const RewrittenModel& r, const std::string& output) {
  const SaveOptions saving = rewrite_save_options(r.model);
  save_model(r.model, output, saving);
  if (saving.external_threshold > 0 && std::filesystem::exists(external_data_path(output)))
    return external_data_path(output);
  return "";
}

nlohmann::ordered_json rewrite_report_of(const RewrittenModel& r, const std::string& model_path,
                                         const std::string& output, const std::string& external_data) {
  const RewriteFacts facts{model_path,     output,
                           external_data,  r.casts_before,
                           count_casts(r.model), r.activation_bytes_before,
                           activation_bytes(r.model)};
  return rewrite_report(facts, r.policy, r.result, r.passes);
}

}  // namespace amp
