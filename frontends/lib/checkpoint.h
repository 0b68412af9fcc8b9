// Training checkpoints: every state tensor of the step (weights, optimizer moments, loss scale and
// its counter, BatchNorm statistics) plus where the run stands (micro-batches consumed, optimizer
// steps, skipped steps, backend runs for the random ops), in one DIR/checkpoint.npz. write_npz
// writes a temporary file and renames it, so a crash leaves the previous checkpoint whole.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace amp {

struct Checkpoint {
  std::vector<std::pair<std::string, Tensor>> state;
  nlohmann::json position;  // micro_batches, optimizer_steps, skipped, backend_runs, seed, ...
};

void write_checkpoint(const std::string& dir, const Checkpoint& c);
// InputError naming the file when it is missing or not a checkpoint.
Checkpoint read_checkpoint(const std::string& dir);

}  // namespace amp
