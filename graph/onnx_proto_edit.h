// Small tools for the rewrites that edit an ONNX proto before ONNX's own tools see it
// (onnx_newer_opsets, onnx_runtime_contrib_ops, onnx_function_inlining): attributes read and set
// by name, a node named in messages, fresh value and node names, typed scalar constants.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace amp::proto {

bool default_domain(const std::string& domain);  // "" or "ai.onnx"

// "node 'name' (Op)", or "a node of type Op" for an unnamed node.
std::string node_label(const onnx::NodeProto& n);

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback);
float attr_float(const onnx::NodeProto& n, const std::string& name, float fallback);
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback);

// True when the attribute was there.
bool remove_attr(onnx::NodeProto& n, const std::string& name);
// Each replaces an attribute of the same name.
void set_attr(onnx::NodeProto& n, const std::string& name, int64_t value);
void set_attr(onnx::NodeProto& n, const std::string& name, float value);
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& values);
void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& value);

// A rank-0 tensor equal to `value` rounded once into `type` (double, float16, bfloat16; float for
// any other type).
onnx::TensorProto scalar_tensor(double value, int32_t type);

// Names not yet used anywhere in a model: its graphs' values and nodes, subgraphs included.
class NameAllocator {
 public:
  void collect(const onnx::GraphProto& g);
  // `base`, or `base_1`, `base_2`, ... : the first not taken; it is taken from then on.
  std::string fresh(const std::string& base);

 private:
  std::set<std::string> names_;
};

}  // namespace amp::proto
