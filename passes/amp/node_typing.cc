#include "passes/amp/node_typing.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>

#include "graph/verify.h"

namespace amp {

namespace {

bool floating_tensor(const Value* v) { return v && v->type().is_tensor() && is_floating(v->dtype()); }

}  // namespace

const onnx::OpSchema* node_schema(const Node& n, const std::vector<OpsetImport>& opsets) {
  for (const auto& o : opsets) {
    const bool same = o.domain == n.domain() || (n.domain().empty() && o.domain == "ai.onnx");
    if (same) return onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(o.version), n.domain());
  }
  return nullptr;
}

const NodeTyper::Formal* NodeTyper::SchemaTypes::at(const std::vector<Formal>& formals, size_t i) {
  if (formals.empty()) return nullptr;
  if (i < formals.size()) return &formals[i];
  return formals.back().variadic ? &formals.back() : nullptr;
}

const NodeTyper::SchemaTypes& NodeTyper::types_of(const onnx::OpSchema& schema) {
  auto [it, fresh] = cache_.try_emplace(&schema);
  SchemaTypes& st = it->second;
  if (!fresh) return st;
  const std::string target = onnx_type_string(ValueType::tensor(target_));
  std::map<std::string, int> index;
  for (const auto& c : schema.typeConstraintParams()) {
    index[c.type_param_str] = static_cast<int>(st.vars.size());
    const auto& allowed = c.allowed_type_strs;
    auto allows = [&](const std::string& t) { return std::find(allowed.begin(), allowed.end(), t) != allowed.end(); };
    const bool beyond = beyond_opset_schemas_ && target_ == DType::kBFloat16 && allows("tensor(float16)");
    st.vars.push_back({c.type_param_str, allows(target) || beyond, 0});
  }
  auto formals = [&](const std::vector<onnx::OpSchema::FormalParameter>& params, std::vector<Formal>& out) {
    for (const auto& f : params) {
      auto var = index.find(f.GetTypeStr());
      out.push_back({var == index.end() ? -1 : var->second, f.GetOption() == onnx::OpSchema::Variadic});
      if (var != index.end()) ++st.vars[var->second].formals;
    }
  };
  formals(schema.inputs(), st.inputs);
  formals(schema.outputs(), st.outputs);
  return st;
}

NodeTyping NodeTyper::operator()(const Node& n, const onnx::OpSchema* schema) {
  NodeTyping t;
  t.flexible_inputs.assign(n.inputs().size(), false);
  if (!schema) return t;
  const SchemaTypes& st = types_of(*schema);
  auto var_of = [](const Formal* f) { return f ? f->var : -1; };
  const bool tensor_outputs = std::all_of(n.outputs().begin(), n.outputs().end(), [](const Value* v) {
    return !v || !v->type().known() || v->type().is_tensor();
  });
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const Formal* f = SchemaTypes::at(st.inputs, i);
    const int var = var_of(f);
    t.flexible_inputs[i] = var >= 0 && tensor_outputs && st.vars[var].formals == 1 && !f->variadic &&
                           st.vars[var].allows_target;
  }

  int data_var = -1;
  if (floating_tensor(n.output(0))) data_var = var_of(SchemaTypes::at(st.outputs, 0));
  for (size_t i = 0; i < n.inputs().size() && data_var < 0; ++i)
    if (floating_tensor(n.input(i)) && !t.flexible_inputs[i]) data_var = var_of(SchemaTypes::at(st.inputs, i));
  t.kind = data_var < 0 ? NodeTyping::Kind::kNoFloatData : NodeTyping::Kind::kData;
  if (data_var < 0) return t;

  t.type_var = st.vars[data_var].name;
  t.allows_target = st.vars[data_var].allows_target;
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (floating_tensor(n.input(i)) && var_of(SchemaTypes::at(st.inputs, i)) == data_var) t.data_inputs.push_back(i);
  for (size_t i = 0; i < n.outputs().size(); ++i)
    if (n.output(i) && var_of(SchemaTypes::at(st.outputs, i)) == data_var) t.data_outputs.push_back(i);
  const Value* first = !t.data_outputs.empty() ? n.output(t.data_outputs[0]) : n.input(t.data_inputs[0]);
  t.data_type = first->dtype();
  // An output type chosen by an attribute cannot follow the inputs (Cast's 'to', RandomNormal's 'dtype').
  t.type_from_attribute = n.attr("to") || n.attr("dtype") || n.op_type() == "ConstantOfShape" ||
                          n.op_type() == "Constant";
  return t;
}

}  // namespace amp
