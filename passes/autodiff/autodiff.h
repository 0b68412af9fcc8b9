// Reverse-mode automatic differentiation over the IR: appends to a graph the nodes that compute the
// gradient of a scalar loss with respect to chosen values (parameters, inputs). Each op's rule lives
// in the table of gradient_rules.h; this file walks the graph and sums gradients of values read
// more than once.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace amp {

// `seed` is dLoss: 1 for a plain gradient, the loss scale under mixed precision. Returns one
// gradient per `wrt` value, named "<name>_grad", or null where the loss does not depend on it.
// Training-mode Dropout nodes without a mask output get one. Throws InputError naming the node
// when an op on the path has no gradient rule.
std::vector<Value*> build_gradients(Graph& g, Value* loss, Value* seed, const std::vector<Value*>& wrt);

}  // namespace amp
