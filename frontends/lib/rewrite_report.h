// What amp-rewrite tells its user: the --report JSON (every node's precision and the rule behind
// it, casts, clamps, estimated activation memory, tensor-core alignment, pass timings) and the
// human summary printed on stderr, which is rendered from that JSON so the two always agree.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/model.h"
#include "passes/amp/amp_passes.h"
#include "passes/pass_manager.h"

namespace amp {

// Measured on the model before and after the pipeline.
struct RewriteFacts {
  std::string model_path, output_path;
  std::string external_data_path;  // "" when every tensor is inline
  int64_t casts_before = 0, casts_after = 0;
  int64_t activation_bytes_before = 0, activation_bytes_after = 0;
};

// Bytes of every node output that depends on a graph input, in every graph: an estimate of
// activation memory without reuse. A symbolic dim (batch, sequence) counts as 1, so the figure is
// per unit of each symbolic dim. `low_precision_as_fp32` counts fp16/bf16 values at 4 bytes: the
// same graph's activations in fp32.
int64_t activation_bytes(const Model& m, bool low_precision_as_fp32 = false);
// Cast nodes in all graphs.
int64_t count_casts(const Model& m);

nlohmann::ordered_json rewrite_report(const RewriteFacts& facts, const AmpPolicy& policy, const AmpResult& result,
                                      const std::vector<PassRun>& passes);
std::string rewrite_summary_text(const nlohmann::ordered_json& report);

}  // namespace amp
