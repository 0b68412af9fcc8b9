#include "graph/type.h"

namespace amp {

Shape Shape::of(const std::vector<int64_t>& values) {
  Shape s;
  for (int64_t v : values) s.dims.push_back(Dim::fixed(v));
  return s;
}

bool Shape::is_static() const {
  for (const auto& d : dims)
    if (!d.is_static()) return false;
  return true;
}

std::optional<std::vector<int64_t>> Shape::static_dims() const {
  std::vector<int64_t> d;
  for (const Dim& x : dims) {
    if (!x.is_static()) return std::nullopt;
    d.push_back(*x.value);
  }
  return d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (const auto& d : dims) n *= d.value.value_or(0);
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += dims[i].is_static() ? std::to_string(*dims[i].value) : (dims[i].param.empty() ? "?" : dims[i].param);
  }
  return s + "]";
}

ValueType ValueType::tensor(DType elem, std::optional<Shape> shape) {
  ValueType t;
  t.kind = Kind::kTensor;
  t.elem = elem;
  t.shape = std::move(shape);
  return t;
}

std::string ValueType::str() const {
  auto inner_str = [&] { return inner ? inner->str() : std::string("?"); };
  switch (kind) {
    case Kind::kUnknown: return "?";
    case Kind::kTensor: return std::string(dtype_name(elem)) + (shape ? shape->str() : "");
    case Kind::kSparseTensor: return "sparse(" + std::string(dtype_name(elem)) + (shape ? shape->str() : "") + ")";
    case Kind::kSequence: return "seq(" + inner_str() + ")";
    case Kind::kMap: return "map(" + std::string(dtype_name(key)) + "," + inner_str() + ")";
    case Kind::kOptional: return "optional(" + inner_str() + ")";
  }
  return "?";
}

bool ValueType::operator==(const ValueType& o) const {
  if (kind != o.kind || elem != o.elem || shape != o.shape || key != o.key || denotation != o.denotation) return false;
  if (!inner || !o.inner) return !inner && !o.inner;
  return *inner == *o.inner;
}

}  // namespace amp
