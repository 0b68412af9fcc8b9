// What the recognisers of exported op chains (GELU, LayerNorm) ask of a node and a value while they
// match: one op of the default domain, a floating type, the one node a value only exists to feed,
// the data of a value that is fixed.
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

// The data of v when it is fixed: a Constant node's tensor, or an initializer that is not also a
// graph input (a caller could feed that one), or either through Identity nodes (PyTorch's export
// shares equal initializers, a fresh model's LayerNorm weights of ones say, through Identity).
inline const Tensor* constant_data(const Value* v) {
  if (!v) return nullptr;
  if (v->has_initializer()) return v->is_input() ? nullptr : &v->initializer();
  const Node* p = v->producer();
  if (is_op(p, "Identity") && p->inputs().size() == 1) return constant_data(p->input(0));
  if (!is_op(p, "Constant")) return nullptr;
  const Attribute* a = p->attr("value");
  return a && a->kind == AttrKind::kTensor ? &a->t : nullptr;
}

}  // namespace amp
