#include "backends/cuda/node_patterns.h"

namespace amp::cuda {

bool is_op(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }

const Node* only_reader(const Value* v) {
  if (!v || v->is_output()) return nullptr;
  const Node* reader = nullptr;
  for (const Use& u : v->uses()) {
    if (is_op(u.node, "Shape") || is_op(u.node, "Size")) continue;
    if (reader) return nullptr;
    reader = u.node;
  }
  return reader;
}

bool is_zero_constant(const Value* v) {
  const Node* c = v ? v->producer() : nullptr;
  if (!is_op(c, "Constant") || !c->attr("value")) return false;
  const Tensor& t = c->attr("value")->t;
  return t.numel() == 1 && t.element(0) == 0.0;
}

bool same_static_shape(const Value* a, const Value* b) {
  const auto& sa = a->type().shape;
  const auto& sb = b->type().shape;
  if (!sa || !sb || sa->rank() != sb->rank()) return false;
  for (size_t d = 0; d < sa->rank(); ++d) {
    const Dim &x = sa->dims[d], &y = sb->dims[d];
    if (!(x.value ? x.value == y.value : !x.param.empty() && x.param == y.param)) return false;
  }
  return true;
}

}  // namespace amp::cuda
