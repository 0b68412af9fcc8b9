// ONNX files <-> the IR. Import reads a .onnx (external data included, memory-mapped), upgrades
// its opset with ONNX's version converter and fills types and shapes with ONNX's shape inference;
// export writes a ModelProto back, inline or with external data, atomically (temp file + rename).
// A round trip is lossless: import(export(m)) is structurally equal to m.
#pragma once

#include <cstdint>
#include <string>

#include "graph/model.h"

namespace onnx {
class ModelProto;
class TypeProto;
}

namespace amp {

// The default-domain opset models are upgraded to on load, which the passes and backends expect.
inline constexpr int64_t kCanonicalOpset = 17;

struct LoadOptions {
  // 0 keeps the model's own opset, and its calls of model-local functions as calls; otherwise the
  // calls are inlined (graph/onnx_function_inlining.h) before the conversion.
  int64_t target_opset = kCanonicalOpset;
  bool infer_shapes = true;
  bool check = true;          // run onnx::checker on the input (errors are InputError naming the file)
  // Rehearse ONNX's checker, converter and shape inference in a forked child first, so that a
  // malformed model that crashes them is an InputError, not a crash of this process. Costs one
  // fork per load (about 2 ms; 30 ms under AddressSanitizer).
  bool isolate_onnx_tools = true;
};

// Throws InputError ("<path>: ..." naming node and op where one is at fault) for anything that is
// not a valid model this project accepts: not ONNX, truncated, unknown op or domain, unsupported
// opset, missing external data, external data outside the model's folder.
Model load_model(const std::string& path, const LoadOptions& options = {});
// The same from bytes already in memory; external data is resolved against base_dir.
Model load_model_from_bytes(const std::string& bytes, const std::string& path_for_errors,
                            const std::string& base_dir, const LoadOptions& options = {});

struct SaveOptions {
  // Tensors of at least this many bytes go to one external data file beside the model
  // ("<model file name>.data"); 0 writes everything inline. Models over 2 GB need this.
  size_t external_threshold = 0;
};

onnx::ModelProto to_proto(const Model& m);
// The model for ONNX's shape inference: main-graph initializers of 4 KiB or more written as typed
// graph inputs instead of copied (inference reads the values of small ones only: shapes, axes).
onnx::ModelProto to_shape_proto(const Model& m);
// An ONNX TypeProto as the import reads it (InputError naming `where` for an unknown element type).
ValueType import_value_type(const onnx::TypeProto& tp, const std::string& where);
// Lossless conversion of an in-memory ModelProto (no file I/O, no version conversion).
Model from_proto(onnx::ModelProto& proto, const std::string& path_for_errors, const std::string& base_dir);
void save_model(const Model& m, const std::string& path, const SaveOptions& options = {});
// The serialized bytes save_model would write (inline data only).
std::string serialize_model(const Model& m);

// Structural equality of two models: same metadata, opsets, graphs (node order, ops, attributes,
// value names and types, initializer contents) and training info. Returns "" when equal, else the
// first difference.
std::string structural_diff(const Model& a, const Model& b);

}  // namespace amp
