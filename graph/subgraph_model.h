// A subgraph (an If branch, a Loop or Scan body) as a model of its own, so a backend can compile it
// like any model: its nodes copied (nested subgraphs too), and the values it reads from the graphs
// around it (ONNX's outer-scope reads) turned into inputs that the node passes in. The backends
// number those reads after the node's own inputs (backends/program.h), in enclosing_reads' order.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/model.h"

namespace amp {

// The values node n's subgraphs read from outside themselves (from n's graph or one around it),
// each once, in the order the subgraphs first read them. Empty for a node without subgraphs.
std::vector<Value*> enclosing_reads(const Node& n);

// Subgraph `body` of a node as a model: the body's inputs, then one input per value of `outer`
// (enclosing_reads of the node), named and typed as that value; its initializers, nodes (their
// subgraphs copied too) and outputs. `opsets` are the enclosing model's.
Model subgraph_model(const Graph& body, const std::vector<Value*>& outer, const std::vector<OpsetImport>& opsets);

}  // namespace amp
