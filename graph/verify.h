// Structural and type checks of a graph, run after every pass under --verify-each and by tests:
// dangling or invisible values, reads before writes (cycles, unsorted nodes), broken use lists,
// names shadowing an enclosing scope, and values whose element types break the op schema's type
// constraints (two inputs bound to T with different types, a type T does not allow).
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"

namespace amp {

// Metadata key of a model whose graph runs only on this project's backends (a training step in
// bf16): its value "1" lets every type variable that allows float16 take bfloat16 too, though
// opset 17's schemas leave bfloat16 out of Conv, MaxPool... (passes/amp: beyond_opset_schemas).
inline constexpr const char* kBfloat16WhereFloat16Key = "ai.onnx_amp.bfloat16_where_float16";

// Problems found, one line each naming the graph, node and op; empty when the graph is sound.
// bfloat16_where_float16: as kBfloat16WhereFloat16Key says (verify(Model) reads the key).
std::vector<std::string> verify(const Graph& g, const std::vector<OpsetImport>& opsets,
                                bool bfloat16_where_float16 = false);
std::vector<std::string> verify(const Model& m);
// Throws Error with the first problems found.
void verify_or_throw(const Model& m);

// ONNX's type string of a value type: "tensor(float16)", "seq(tensor(float))".
std::string onnx_type_string(const ValueType& t);

}  // namespace amp
