// ONNX's shape inference gives up where a shape depends on values (a Slice with computed ends, a
// Reshape to a computed shape) and everything downstream loses even its rank. Gradient rules need
// ranks (MatMul transposes its last two axes, ReduceMean's gradient expands over the reduced
// axes), so this fills in every value whose rank ONNX left unknown with what the op's shape rule
// (graph/ops/shape_rules.h, the rules the CPU kernels apply) says from what is known of its inputs:
// ranks through Reshape (from the length of its shape input), Transpose, Flatten, Split, Concat,
// reductions and every elementwise op, and the dims that follow (the contents of initializers,
// Constant and Shape nodes count). Dims it cannot know stay unknown; known types are never changed.
#pragma once

#include "graph/graph.h"

namespace amp {

// InputError naming the node and op when what is known contradicts an op.
void complete_shapes(Graph& g);

}  // namespace amp
