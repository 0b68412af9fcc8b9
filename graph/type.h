// Types of values as ONNX's TypeProto describes them: tensors with static or symbolic dims, and the
// sequence / map / optional / sparse types that ONNX's node tests use. Kept complete so that an
// imported model exports back without loss.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace amp {

struct Dim {
  std::optional<int64_t> value;  // set for a static dim
  std::string param;             // symbolic name ("N"), empty when unknown or static
  std::string denotation;

  static Dim fixed(int64_t v) { return Dim{v, {}, {}}; }
  static Dim symbol(std::string name) { return Dim{std::nullopt, std::move(name), {}}; }
  bool is_static() const { return value.has_value(); }
  bool operator==(const Dim& o) const { return value == o.value && param == o.param && denotation == o.denotation; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

struct Shape {
  std::vector<Dim> dims;

  static Shape of(const std::vector<int64_t>& values);
  size_t rank() const { return dims.size(); }
  bool is_static() const;
  // The dims as integers when every one is static.
  std::optional<std::vector<int64_t>> static_dims() const;
  // Element count of a static shape.
  int64_t numel() const;
  std::string str() const;  // "[N,3,224,224]"
  bool operator==(const Shape& o) const { return dims == o.dims; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

struct ValueType {
  enum class Kind { kUnknown, kTensor, kSparseTensor, kSequence, kMap, kOptional };
  Kind kind = Kind::kUnknown;
  DType elem = DType::kUndefined;      // tensor / sparse tensor element type
  std::optional<Shape> shape;          // unset when the rank is unknown
  DType key = DType::kUndefined;       // map key type
  std::shared_ptr<ValueType> inner;    // sequence / optional element, map value
  std::string denotation;

  static ValueType tensor(DType elem, std::optional<Shape> shape = std::nullopt);
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool known() const { return kind != Kind::kUnknown; }
  std::string str() const;  // "float16[N,128]", "seq(float[2])"
  bool operator==(const ValueType& o) const;
  bool operator!=(const ValueType& o) const { return !(*this == o); }
};

}  // namespace amp
