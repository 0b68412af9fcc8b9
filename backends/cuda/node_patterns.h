// Graph patterns the cuda backend matches when it makes device units: which node a value flows
// into, and what may be absorbed into the kernel of another node.
#pragma once

#include "graph/node.h"
#include "graph/value.h"

namespace amp::cuda {

// n is the ONNX-domain op `op`.
bool is_op(const Node* n, const char* op);

// The one node that reads v's contents. Readers of its dims alone (Shape, Size: host steps while
// planning, as the backward pass's shape arithmetic is) do not count: an absorbed value still has
// dims, it is only never stored. Null for a graph output or a value with other readers.
const Node* only_reader(const Value* v);

// v is made by a Constant node holding a single zero: what autodiff compares and fills with.
bool is_zero_constant(const Value* v);

// a and b have one static shape: every dim the same number or the same symbol, so an Add of them
// does not broadcast.
bool same_static_shape(const Value* a, const Value* b);

}  // namespace amp::cuda
