// How many nodes of an op a graph holds: what the pass tests assert before and after a rewrite.
#pragma once

#include <cstddef>
#include <string>

#include "graph/graph.h"

namespace amp::test {

inline size_t count_op(const Graph& g, const std::string& op) {
  size_t k = 0;
  for (const Node* n : g.nodes()) k += n->op_type() == op;
  return k;
}

}  // namespace amp::test
