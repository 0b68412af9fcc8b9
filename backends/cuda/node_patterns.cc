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

}  // namespace amp::cuda
