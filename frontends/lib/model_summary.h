// What amp-inspect reports about a model: the figures behind its text summary and its --json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/model.h"

namespace amp {

// Summary of the main graph: producer, IR version, opsets, inputs/outputs with types, node count,
// op histogram, parameters (elements and bytes per dtype), Casts, and training info when present.
nlohmann::ordered_json summarize(const Model& m);
// The same as readable text.
std::string summary_text(const nlohmann::ordered_json& summary);

// "3.2 MiB", "12 KiB", "100 B".
std::string human_bytes(int64_t bytes);

// Precision a node computes in: the element type of its first floating output ("" when none).
std::string node_precision(const Node& n);

}  // namespace amp
