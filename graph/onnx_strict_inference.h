// ONNX's shape inference in the strict form that onnx.checker.check_model(full_check=True) runs
// (types checked, a node's error an error) and that ONNX Runtime's graph resolution resembles: a
// model whose nodes contradict their ops (a Concat axis beyond a scalar's rank, an If branch that
// declares inputs, a Squeeze of a dim that is not 1...) fails it. The import infers leniently, as
// ONNX Runtime does for what it accepts; amp-rewrite checks what it writes with this.
#pragma once

#include <string>

#include "graph/model.h"

namespace onnx {
class ModelProto;
}

namespace amp {

// "" when the model passes; else ONNX's first error, on one line.
std::string strict_inference_error(const Model& m);
// The same for the model as to_shape_proto (graph/onnx_io.h) wrote it, which it consumes.
std::string strict_inference_error(onnx::ModelProto p);

}  // namespace amp
