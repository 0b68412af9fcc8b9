// Types for values a pass created or changed, from ONNX's shape inference run as the import runs it
// (lenient, no data propagation), so that a model a pass edited carries the types the import of its
// file would give it: writing it and reading it back changes nothing (an unknown dim gets the
// symbol inference names it with, as on import). A value inference leaves untyped, or gives no
// shape where it has one (a Reshape to computed dims), keeps its type: the file then declares it, and
// the import keeps what a file declares. If ONNX's inference refuses the edited model, every value
// keeps the type the pass gave it.
#pragma once

#include <vector>

#include "graph/model.h"

namespace amp {

// `values` belong to m's main graph.
void reinfer_types(Model& m, const std::vector<Value*>& values);

}  // namespace amp
