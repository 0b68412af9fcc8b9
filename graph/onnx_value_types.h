// What an ONNX proto says, or implies, about a value's element type and dims, for the rewrites that
// run on the proto before ONNX's shape inference can (graph/onnx_newer_opsets.cc, models at opsets
// ONNX 1.12 does not know; graph/onnx_runtime_contrib_ops.cc, ops of another domain).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace amp {

// The graphs around a node, outermost first: a name a subgraph reads may be defined further out.
using ProtoGraphChain = std::vector<const onnx::GraphProto*>;

// The declared tensor type of a name (graph input, value_info or output), innermost graph first.
const onnx::TypeProto_Tensor* declared_tensor_type(const ProtoGraphChain& chain, const std::string& name);

// The dims of a name: an initializer's, or declared (each dim known or not); nullopt without a rank.
std::optional<std::vector<std::optional<int64_t>>> known_dims(const ProtoGraphChain& chain, const std::string& name);

// The element type of a name: an initializer's, declared, or followed back through its producers
// (ops of a float data path make their first input's type; Cast, Constant, Shape, Size and
// DequantizeLinear say theirs; ONNX Runtime's fused com.microsoft ops make their first input's).
// 0 when unknown.
int32_t known_elem_type(const ProtoGraphChain& chain, const std::string& name);

}  // namespace amp
