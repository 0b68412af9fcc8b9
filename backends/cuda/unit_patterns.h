// The fused device units the schedule looks for before every other node gets an op of its own:
// named patterns, each matched in its own file, tried in the table's order (a node one pattern
// takes is not offered to the next).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "graph/graph.h"

namespace amp::cuda {

struct UnitMatch {
  std::vector<const Node*> nodes;     // the unit's nodes, the first naming it in errors and reports
  std::vector<const Value*> inputs;   // the op's operands, in its order (null for absent)
  std::vector<const Value*> outputs;  // the op's results, in its order (null for absent)
  std::unique_ptr<CudaOp> op;
};

// Matches in g; a node for which `excluded` is true (a host step, a node already in a unit) is
// not touched.
using UnitMatcher = std::vector<UnitMatch> (*)(const Graph& g, const std::function<bool(const Node*)>& excluded);

struct UnitPattern {
  std::string_view name;
  UnitMatcher match;
};

const std::vector<UnitPattern>& unit_patterns();

}  // namespace amp::cuda
