// Structural and type checks of a graph, run after every pass under --verify-each and by tests:
// dangling or invisible values, reads before writes (cycles, unsorted nodes), broken use lists,
// names shadowing an enclosing scope, and values whose element types break the op schema's type
// constraints (two inputs bound to T with different types, a type T does not allow).
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"

namespace amp {

// Problems found, one line each naming the graph, node and op; empty when the graph is sound.
std::vector<std::string> verify(const Graph& g, const std::vector<OpsetImport>& opsets);
std::vector<std::string> verify(const Model& m);
// Throws Error with the first problems found.
void verify_or_throw(const Model& m);

// ONNX's type string of a value type: "tensor(float16)", "seq(tensor(float))".
std::string onnx_type_string(const ValueType& t);

}  // namespace amp
