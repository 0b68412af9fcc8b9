#include "graph/onnx_value_types.h"

#include <algorithm>
#include <set>

namespace amp {

const onnx::TypeProto_Tensor* declared_tensor_type(const ProtoGraphChain& chain, const std::string& name) {
  for (auto g = chain.rbegin(); g != chain.rend(); ++g)
    for (const auto* list : {&(*g)->input(), &(*g)->value_info(), &(*g)->output()})
      for (const auto& vi : *list)
        if (vi.name() == name && vi.has_type() && vi.type().has_tensor_type()) return &vi.type().tensor_type();
  return nullptr;
}

std::optional<std::vector<std::optional<int64_t>>> known_dims(const ProtoGraphChain& chain, const std::string& name) {
  for (auto g = chain.rbegin(); g != chain.rend(); ++g)
    for (const auto& t : (*g)->initializer())
      if (t.name() == name) return std::vector<std::optional<int64_t>>(t.dims().begin(), t.dims().end());
  const auto* type = declared_tensor_type(chain, name);
  if (!type || !type->has_shape()) return std::nullopt;
  std::vector<std::optional<int64_t>> dims;
  for (const auto& d : type->shape().dim())
    dims.push_back(d.has_dim_value() ? std::optional<int64_t>(d.dim_value()) : std::nullopt);
  return dims;
}

namespace {

int32_t elem_type(const ProtoGraphChain& chain, const std::string& name, int depth) {
  for (auto g = chain.rbegin(); g != chain.rend(); ++g)
    for (const auto& t : (*g)->initializer())
      if (t.name() == name) return t.data_type();
  if (const auto* type = declared_tensor_type(chain, name)) return type->elem_type();
  if (depth > 64) return 0;
  static const std::set<std::string> kSameAsFirstInput = {
      "Conv", "ConvTranspose", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Mish", "Softplus", "Add", "Sub", "Mul",
      "Div", "Pow", "MatMul", "Gemm", "BatchNormalization", "LayerNormalization", "GroupNormalization",
      "InstanceNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Reshape", "Flatten",
      "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Gather", "Identity", "Pad", "Resize", "Softmax",
      "LogSoftmax", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Erf", "Sqrt", "Exp", "Neg", "Abs",
      "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu", "Dropout", "Split", "Expand", "Tile"};
  for (auto g = chain.rbegin(); g != chain.rend(); ++g)
    for (const auto& n : (*g)->node()) {
      if (std::find(n.output().begin(), n.output().end(), name) == n.output().end()) continue;
      static const std::set<std::string> kFusedSameAsFirstInput = {
          "FusedMatMul", "FastGelu", "BiasGelu", "Gelu", "QuickGelu", "SkipLayerNormalization",
          "SkipSimplifiedLayerNormalization", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
          "QLinearAveragePool", "QLinearGlobalAveragePool", "Attention"};
      if (n.domain() == "com.microsoft" && n.op_type() == "EmbedLayerNormalization")
        return n.output(0) == name && n.input_size() > 2 ? elem_type(chain, n.input(2), depth + 1) : 0;
      if (n.domain() == "com.microsoft")
        return kFusedSameAsFirstInput.count(n.op_type()) && n.input_size() > 0 ? elem_type(chain, n.input(0), depth + 1) : 0;
      if (!n.domain().empty() && n.domain() != "ai.onnx") return 0;
      if (n.op_type() == "Cast" || n.op_type() == "Constant") {
        for (const auto& a : n.attribute()) {
          if (n.op_type() == "Cast" && a.name() == "to") return static_cast<int32_t>(a.i());
          if (n.op_type() == "Constant" && a.name() == "value") return a.t().data_type();
        }
        return 0;
      }
      if (n.op_type() == "Shape" || n.op_type() == "Size") return onnx::TensorProto::INT64;
      if (n.op_type() == "DequantizeLinear") return onnx::TensorProto::FLOAT;
      if (kSameAsFirstInput.count(n.op_type()) && n.input_size() > 0)
        return elem_type(chain, n.input(0), depth + 1);
      return 0;
    }
  return 0;
}

}  // namespace

int32_t known_elem_type(const ProtoGraphChain& chain, const std::string& name) { return elem_type(chain, name, 0); }

}  // namespace amp
