// What the recognisers of exported op chains (GELU, LayerNorm) ask of a node and a value while they
// match: one op of the default domain, a floating type, the one node a value only exists to feed.
#pragma once

#include "graph/graph.h"

namespace amp {

// n is `op` of the default domain, with one output.
inline bool is_op(const Node* n, const char* op) {
  return n && n->domain().empty() && n->op_type() == op && n->outputs().size() == 1;
}

inline bool is_float(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kDouble;
}

// The node that reads v when v exists only to feed it: one use, not a graph output.
inline Node* sole_reader(const Value* v) {
  if (!v || v->is_output() || v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

}  // namespace amp
