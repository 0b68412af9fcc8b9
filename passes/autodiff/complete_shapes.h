// ONNX's shape inference gives up where a shape depends on values (a Slice with computed ends, a
// Reshape to a computed shape) and everything downstream loses even its rank. Gradient rules need
// ranks (MatMul transposes its last two axes), so this fills in what follows from the op alone:
// unary ops keep their input's shape, broadcasting ops take the largest rank, MatMul, Transpose,
// Slice and Reshape theirs. Dims it cannot know stay unknown; known types are never changed.
#pragma once

#include "graph/graph.h"

namespace amp {

void complete_shapes(Graph& g);

}  // namespace amp
