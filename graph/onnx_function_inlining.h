// Model-local functions (ModelProto.functions, IR 8 on): torch 2's dynamo exporter and onnxscript
// write a model as calls of them (torch_lib's aten_* functions, a module per function), and ONNX
// Runtime inlines them. So does this import: each call of a local function becomes the function's
// body, its values renamed apart per call, its formal inputs and outputs bound to the call's, each
// attribute reference (ref_attr_name) given the call's attribute or the function's default (IR 9's
// attribute_proto, read from the fields ONNX 1.12's protobuf keeps as unknown), calls inside bodies
// inlined in turn. The inlined functions are dropped from the model; a function nothing calls
// stays as it was.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace amp {

// Inlines every call of a model-local function (subgraphs included). Returns the number of calls
// inlined. Throws InputError naming `path`, the call and the function where it cannot (recursion
// deeper than 64, a body with a subgraph attribute, a function whose opset for a domain differs
// from the model's).
int inline_local_functions(onnx::ModelProto& p, const std::string& path);

}  // namespace amp
