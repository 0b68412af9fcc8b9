#include "passes/amp/node_typing.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <set>

#include "graph/verify.h"

namespace amp {

namespace {

bool floating_tensor(const Value* v) { return v && v->type().is_tensor() && is_floating(v->dtype()); }

// The formal parameter for actual position i (the last one repeats when it is variadic).
const onnx::OpSchema::FormalParameter* formal_at(const std::vector<onnx::OpSchema::FormalParameter>& formals,
                                                 size_t i) {
  if (formals.empty()) return nullptr;
  if (i < formals.size()) return &formals[i];
  const auto& last = formals.back();
  return last.GetOption() == onnx::OpSchema::Variadic ? &last : nullptr;
}

}  // namespace

const onnx::OpSchema* node_schema(const Node& n, const std::vector<OpsetImport>& opsets) {
  for (const auto& o : opsets) {
    const bool same = o.domain == n.domain() || (n.domain().empty() && o.domain == "ai.onnx");
    if (same) return onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(o.version), n.domain());
  }
  return nullptr;
}

NodeTyping node_typing(const Node& n, const onnx::OpSchema* schema, DType target) {
  NodeTyping t;
  t.flexible_inputs.assign(n.inputs().size(), false);
  if (!schema) return t;
  std::map<std::string, std::set<std::string>> allowed;
  for (const auto& c : schema->typeConstraintParams())
    allowed[c.type_param_str].insert(c.allowed_type_strs.begin(), c.allowed_type_strs.end());
  const std::string target_str = onnx_type_string(ValueType::tensor(target));
  auto var_of = [&](const onnx::OpSchema::FormalParameter* f) -> std::string {
    return f && allowed.count(f->GetTypeStr()) ? f->GetTypeStr() : std::string();
  };

  std::map<std::string, int> formals_per_var;
  for (const auto* list : {&schema->inputs(), &schema->outputs()})
    for (const auto& f : *list)
      if (!var_of(&f).empty()) ++formals_per_var[f.GetTypeStr()];
  const bool tensor_outputs = std::all_of(n.outputs().begin(), n.outputs().end(), [](const Value* v) {
    return !v || !v->type().known() || v->type().is_tensor();
  });
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const auto* f = formal_at(schema->inputs(), i);
    const std::string var = var_of(f);
    t.flexible_inputs[i] = !var.empty() && tensor_outputs && formals_per_var[var] == 1 &&
                           f->GetOption() != onnx::OpSchema::Variadic && allowed[var].count(target_str);
  }

  if (const Value* out0 = n.output(0); floating_tensor(out0)) t.type_var = var_of(formal_at(schema->outputs(), 0));
  for (size_t i = 0; i < n.inputs().size() && t.type_var.empty(); ++i)
    if (floating_tensor(n.input(i)) && !t.flexible_inputs[i]) t.type_var = var_of(formal_at(schema->inputs(), i));
  t.kind = t.type_var.empty() ? NodeTyping::Kind::kNoFloatData : NodeTyping::Kind::kData;
  if (t.type_var.empty()) return t;

  t.allows_target = allowed[t.type_var].count(target_str) > 0;
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (floating_tensor(n.input(i)) && var_of(formal_at(schema->inputs(), i)) == t.type_var) t.data_inputs.push_back(i);
  for (size_t i = 0; i < n.outputs().size(); ++i)
    if (n.output(i) && var_of(formal_at(schema->outputs(), i)) == t.type_var) t.data_outputs.push_back(i);
  const Value* first = !t.data_outputs.empty() ? n.output(t.data_outputs[0]) : n.input(t.data_inputs[0]);
  t.data_type = first->dtype();
  // An output type chosen by an attribute cannot follow the inputs (Cast's 'to', RandomNormal's 'dtype').
  t.type_from_attribute = n.attr("to") || n.attr("dtype") || n.op_type() == "ConstantOfShape" ||
                          n.op_type() == "Constant";
  return t;
}

}  // namespace amp
