// Graphviz DOT of a graph, nodes filled by the precision of their outputs (fp32 blue, fp16 orange,
// bf16 purple, fp64 grey), Casts drawn as diamonds so the precision boundaries stand out.
#pragma once

#include <functional>
#include <string>

#include "graph/graph.h"

namespace amp {

// `tooltip` may add a line per node (e.g. the rewrite's reason); it may be empty.
std::string graph_to_dot(const Graph& g, const std::function<std::string(const Node&)>& tooltip = {});

}  // namespace amp
