#include "graph/onnx_proto_edit.h"

#include "graph/half.h"

namespace amp::proto {

bool default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

std::string node_label(const onnx::NodeProto& n) {
  return n.name().empty() ? "a node of type " + n.op_type() : "node '" + n.name() + "' (" + n.op_type() + ")";
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

float attr_float(const onnx::NodeProto& n, const std::string& name, float fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}

std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

bool remove_attr(onnx::NodeProto& n, const std::string& name) {
  auto* list = n.mutable_attribute();
  for (auto it = list->begin(); it != list->end(); ++it)
    if (it->name() == name) {
      list->erase(it);
      return true;
    }
  return false;
}

namespace {

onnx::AttributeProto* fresh_attr(onnx::NodeProto& n, const std::string& name, onnx::AttributeProto::AttributeType type) {
  remove_attr(n, name);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

}  // namespace

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t value) {
  fresh_attr(n, name, onnx::AttributeProto::INT)->set_i(value);
}

void set_attr(onnx::NodeProto& n, const std::string& name, float value) {
  fresh_attr(n, name, onnx::AttributeProto::FLOAT)->set_f(value);
}

void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = fresh_attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& value) {
  fresh_attr(n, name, onnx::AttributeProto::STRING)->set_s(value);
}

onnx::TensorProto scalar_tensor(double value, int32_t type) {
  onnx::TensorProto t;
  switch (type) {
    case onnx::TensorProto::DOUBLE:
      t.set_data_type(type);
      t.add_double_data(value);
      break;
    case onnx::TensorProto::FLOAT16:
      t.set_data_type(type);
      t.add_int32_data(fp32_to_fp16(static_cast<float>(value)));
      break;
    case onnx::TensorProto::BFLOAT16:
      t.set_data_type(type);
      t.add_int32_data(fp32_to_bf16(static_cast<float>(value)));
      break;
    default:
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.add_float_data(static_cast<float>(value));
  }
  return t;
}

void NameAllocator::collect(const onnx::GraphProto& g) {
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& vi : *list) names_.insert(vi.name());
  for (const auto& t : g.initializer()) names_.insert(t.name());
  for (const auto& n : g.node()) {
    names_.insert(n.name());
    for (const auto& o : n.output()) names_.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect(a.g());
      for (const auto& sub : a.graphs()) collect(sub);
    }
  }
}

std::string NameAllocator::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
  names_.insert(name);
  return name;
}

}  // namespace amp::proto
