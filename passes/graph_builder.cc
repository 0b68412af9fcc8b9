#include "passes/graph_builder.h"

#include <cstring>

#include "graph/error.h"
#include "graph/half.h"

namespace amp {

std::vector<Value*> GraphBuilder::emit(const std::string& op, const std::vector<Value*>& inputs,
                                       const std::vector<ValueType>& types, std::vector<Attribute> attrs,
                                       const std::string& domain) {
  std::vector<std::string> names;
  for (const ValueType& t : types) names.push_back(t.known() ? g_.fresh_name(op + "_out") : Graph::kAbsent);
  Node* n = g_.add_node(op, inputs, names, domain);
  for (Attribute& a : attrs) n->set_attr(std::move(a));
  std::vector<Value*> outs = n->outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i]) outs[i]->set_type(types[i]);
  return outs;
}

Value* GraphBuilder::op(const std::string& op, const std::vector<Value*>& inputs, DType elem,
                        std::vector<Attribute> attrs) {
  return emit(op, inputs, {ValueType::tensor(elem)}, std::move(attrs))[0];
}

Value* GraphBuilder::same(const std::string& op, const std::vector<Value*>& inputs, std::vector<Attribute> attrs) {
  return this->op(op, inputs, inputs.at(0)->dtype(), std::move(attrs));
}

Value* GraphBuilder::where(Value* cond, Value* a, Value* b) { return op("Where", {cond, a, b}, a->dtype()); }

Value* GraphBuilder::cast(Value* x, DType to) {
  if (x->dtype() == to) return x;
  return emit("Cast", {x}, {ValueType::tensor(to, x->type().shape)},
              attrs(Attribute::of_int("to", static_cast<int64_t>(to))))[0];
}

Value* GraphBuilder::transpose(Value* x, const std::vector<int64_t>& perm) {
  return same("Transpose", {x}, attrs(Attribute::of_ints("perm", perm)));
}

Value* GraphBuilder::reduce_sum(Value* x, const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<Value*> in{x};
  if (!axes.empty()) in.push_back(int64s(axes));
  return same("ReduceSum", in, attrs(Attribute::of_int("keepdims", keepdims ? 1 : 0)));
}

Value* GraphBuilder::zeros_like(Value* x) {
  Tensor zero(x->dtype(), {1});
  return op("ConstantOfShape", {shape_of(x)}, x->dtype(), attrs(Attribute::of_tensor("value", std::move(zero))));
}

Value* GraphBuilder::scalar(double v, DType t) {
  auto key = std::make_tuple(v, t);
  if (auto it = scalars_.find(key); it != scalars_.end()) return it->second;
  Tensor c(t, {});
  const float f = static_cast<float>(v);
  switch (t) {
    case DType::kFloat: *c.mutable_as<float>() = f; break;
    case DType::kDouble: *c.mutable_as<double>() = v; break;
    case DType::kFloat16: *c.mutable_as<uint16_t>() = fp32_to_fp16(f); break;
    case DType::kBFloat16: *c.mutable_as<uint16_t>() = fp32_to_bf16(f); break;
    case DType::kInt64: *c.mutable_as<int64_t>() = static_cast<int64_t>(v); break;
    case DType::kInt32: *c.mutable_as<int32_t>() = static_cast<int32_t>(v); break;
    case DType::kBool: *c.mutable_as<bool>() = v != 0; break;
    default: throw Error("internal: no scalar constant of type " + std::string(dtype_name(t)));
  }
  return scalars_[key] = constant(std::move(c));
}

Value* GraphBuilder::int64s(const std::vector<int64_t>& v) {
  if (auto it = int_vectors_.find(v); it != int_vectors_.end()) return it->second;
  Tensor c(DType::kInt64, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(c.mutable_data(), v.data(), v.size() * sizeof(int64_t));
  return int_vectors_[v] = constant(std::move(c));
}

Value* GraphBuilder::constant(Tensor t) {
  ValueType type = ValueType::tensor(t.dtype, Shape::of(t.dims));
  return emit("Constant", {}, {type}, attrs(Attribute::of_tensor("value", std::move(t))))[0];
}

int64_t rank_of(const Value* v) {
  return v->type().shape ? static_cast<int64_t>(v->type().shape->rank()) : -1;
}

int64_t normalize_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

const Tensor* constant_tensor(const Value* v) {
  if (!v) return nullptr;
  if (v->has_initializer()) return &v->initializer();
  const Node* p = v->producer();
  if (p && p->op_type() == "Constant" && p->domain().empty())
    if (const Attribute* a = p->attr("value"); a && a->kind == AttrKind::kTensor) return &a->t;
  return nullptr;
}

std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  const Tensor* t = constant_tensor(v);
  if (!t || (t->dtype != DType::kInt64 && t->dtype != DType::kInt32)) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->numel(); ++i) out.push_back(static_cast<int64_t>(t->element(i)));
  return out;
}

}  // namespace amp
