#include "graph/onnx_strict_inference.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/onnx_io.h"

namespace amp {

std::string strict_inference_error(const Model& m) { return strict_inference_error(to_shape_proto(m)); }

std::string strict_inference_error(onnx::ModelProto p) {
  register_amp_op_schemas();
  onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/false);
  try {
    onnx::shape_inference::InferShapes(p, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return one_line(e.what());
  }
  return "";
}

}  // namespace amp
