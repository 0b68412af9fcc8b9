// amp-inspect --cuda-plan: what the CUDA backend would run for a model at given dims, worked out
// without a GPU (the backend's Schedule, plan and memory layout touch no device): the device
// units in run order — cuBLASLt products with what their epilogues absorb, generated fused
// kernels, multi-tensor launches, cuDNN and hand-written kernels — the views that run nothing,
// the host steps, the planned activation arena, and the bytes each unit reads and writes. A model saved by amp-train
// --save-training-graph is planned as the whole training step amp-train runs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/model.h"

namespace amp {

// dims: a value for every symbolic dim of the graph's data inputs ("N" -> 32). Throws InputError
// naming the input and the dim when one is missing, and for what the backend cannot run.
nlohmann::ordered_json cuda_plan_report(const Model& m, const std::map<std::string, int64_t>& dims);
std::string cuda_plan_text(const nlohmann::ordered_json& report);

// "NAME=VALUE" -> {NAME, VALUE}; InputError for anything else.
std::pair<std::string, int64_t> parse_dim_assignment(const std::string& text);

}  // namespace amp
