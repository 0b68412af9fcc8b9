#include "graph/onnx_reinfer.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>
#include <unordered_map>
#include <unordered_set>

#include "graph/onnx_io.h"

namespace amp {

void reinfer_types(Model& m, const std::vector<Value*>& values) {
  if (values.empty()) return;
  std::unordered_set<std::string> names;
  for (const Value* v : values) names.insert(v->name());
  onnx::ModelProto p = to_shape_proto(m);
  auto* vis = p.mutable_graph()->mutable_value_info();
  for (int i = vis->size() - 1; i >= 0; --i)
    if (names.count(vis->Get(i).name())) vis->DeleteSubrange(i, 1);
  onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/false);
  try {
    onnx::shape_inference::InferShapes(p, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return;  // the import inferred this model; if ONNX now refuses it, the pass's own types stand
  }
  std::unordered_map<std::string, const onnx::TypeProto*> inferred;
  for (const auto& vi : p.graph().value_info()) inferred[vi.name()] = &vi.type();
  for (const auto& vi : p.graph().output()) inferred.emplace(vi.name(), &vi.type());
  for (Value* v : values) {
    auto it = inferred.find(v->name());
    if (it == inferred.end() || it->second->value_case() == onnx::TypeProto::VALUE_NOT_SET) continue;
    ValueType t = import_value_type(*it->second, "value '" + v->name() + "'");
    if (!t.shape && v->type().shape && t.kind == v->type().kind) continue;  // inference knows less
    v->set_type(std::move(t));
  }
}

}  // namespace amp
