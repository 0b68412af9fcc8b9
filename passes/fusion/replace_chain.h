// Replacing a recognised chain of nodes by one node (the GELU and LayerNorm recognisers): the new
// node takes over the chain's output — its readers, its name and its value_info entry — and the
// chain goes, with the Constant nodes nothing else reads.
#pragma once

#include <unordered_set>
#include <vector>

#include "graph/graph.h"

namespace amp {

// `chain` in graph order, its last node's output 0 the chain's result; `replacement` already added
// (its output 0 gets the result's type, or `x`'s where the result has no shape: these ops keep
// their input's type and shape). The removed nodes are added to `removed`.
void replace_chain(Graph& g, const std::vector<Node*>& chain, Node* replacement, const Value* x,
                   std::unordered_set<Node*>& removed);

}  // namespace amp
