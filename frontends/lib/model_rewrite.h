// amp-rewrite's work on one model, shared by the command and the Python package (onnx_amp.rewrite
// and its onnxconverter-common drop-ins): the settings as the flags (or keyword arguments) give
// them, the policy they make, the pipeline run and checked, the warnings, the report, the file.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"
#include "graph/onnx_io.h"
#include "passes/amp/amp_passes.h"
#include "passes/pass_manager.h"

namespace amp {

struct RewriteSettings {
  std::string dtype, weights, config;  // "": the config file's, else fp16 and keep
  std::string cast_placement;          // "compute" / "consumer"; "": the config file's, else compute
  std::optional<double> min_magnitude; // AmpPolicy::min_magnitude; unset: the config file's, else 0 (off)
  std::optional<bool> keep_io_types;   // unset: the config file's, else true
  std::vector<std::string> allow, deny, infer, clear;  // list edits: "Op" puts on, "-Op" takes off
  std::vector<std::string> block;                      // node name patterns (regex, whole name)
  std::vector<std::string> block_names;                // node names, matched exactly
  // Ops that stay fp32 wherever they are (onnxconverter-common's op_block_list): each is taken off
  // the list it is on; an op on no list stays fp32 already.
  std::vector<std::string> block_ops;
  std::string edits_source = "command line";  // names the list edits in errors
  bool verify_each = false;
};

// The policy the settings describe (the config file read, list edits applied, nodes blocked).
// InputError for a bad config, an unknown op, an op on two lists, a bad pattern.
AmpPolicy make_rewrite_policy(const RewriteSettings& s);

struct RewrittenModel {
  Model model;
  AmpPolicy policy;
  AmpResult result;
  std::vector<PassRun> passes;
  int64_t casts_before = 0, activation_bytes_before = 0;
  // One line per op type amp-run has no kernel for (file, first such node, op): the rewrite is
  // still valid ONNX for other runtimes.
  std::vector<std::string> warnings;
};

// Rewrites an inference model (InputError for one with training_info) and checks the result;
// `model_path` names it in messages.
RewrittenModel rewrite_model(Model m, const AmpPolicy& policy, const std::string& model_path, bool verify_each);

// Weights stay beside the model when they came that way, or when they would pass protobuf's 2 GB.
SaveOptions rewrite_save_options(const Model& m);
// Writes the rewrite atomically; returns the external data file written beside it, or "".
std::string save_rewrite(const RewrittenModel& r, const std::string& output);

// The --report JSON (rewrite_report.h); `output` and `external_data` as written ("" for none).
nlohmann::ordered_json rewrite_report_of(const RewrittenModel& r, const std::string& model_path,
                                         const std::string& output, const std::string& external_data);

}  // namespace amp
