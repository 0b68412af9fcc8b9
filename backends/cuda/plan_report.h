// amp-inspect --cuda-plan's device half: what the backend runs for a model at given input shapes,
// worked out without a GPU (the Schedule, its plan and the device memory layout touch no device).
// frontends/lib/cuda_plan_report.cc gives it the model, feeds and fetches and adds the rest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/model.h"
#include "graph/tensor.h"

namespace amp::cuda {

// The device units in run order (kind, node, nodes, bytes, outputs), fused kernels, views, host
// steps, read-through copies, nodes and memory of running `m` with `options` on `feeds` for
// `fetch_names`. human_bytes formats a packed operand's size. Throws InputError for what the
// backend cannot run.
nlohmann::ordered_json plan_report(const Model& m, const CompileOptions& options, const std::vector<Tensor>& feeds,
                                   const std::vector<std::string>& fetch_names, std::string (*human_bytes)(int64_t));

}  // namespace amp::cuda
