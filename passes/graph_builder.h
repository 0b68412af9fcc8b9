// Emits nodes at the end of a graph with their outputs typed, so the passes that build a training
// step (gradients, loss, optimizer, loss scaling) read like the math they implement. Element types
// are always set; shapes where the rule knows them (gradients take their forward value's type).
// Scalar constants are Constant nodes, made once per (value, type).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace amp {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }

  // One node; outputs typed by `types` (a type of kind kUnknown makes that output absent).
  std::vector<Value*> emit(const std::string& op, const std::vector<Value*>& inputs,
                           const std::vector<ValueType>& types, std::vector<Attribute> attrs = {},
                           const std::string& domain = "");
  // One node with one output of element type `elem` (shape unknown).
  Value* op(const std::string& op, const std::vector<Value*>& inputs, DType elem, std::vector<Attribute> attrs = {});
  // One node whose output has the element type of its first input.
  Value* same(const std::string& op, const std::vector<Value*>& inputs, std::vector<Attribute> attrs = {});

  Value* add(Value* a, Value* b) { return same("Add", {a, b}); }
  Value* sub(Value* a, Value* b) { return same("Sub", {a, b}); }
  Value* mul(Value* a, Value* b) { return same("Mul", {a, b}); }
  Value* div(Value* a, Value* b) { return same("Div", {a, b}); }
  Value* neg(Value* a) { return same("Neg", {a}); }
  Value* sqrt(Value* a) { return same("Sqrt", {a}); }
  Value* exp(Value* a) { return same("Exp", {a}); }
  Value* log(Value* a) { return same("Log", {a}); }
  Value* min(Value* a, Value* b) { return same("Min", {a, b}); }
  Value* max(Value* a, Value* b) { return same("Max", {a, b}); }
  Value* where(Value* cond, Value* a, Value* b);
  Value* greater(Value* a, Value* b) { return op("Greater", {a, b}, DType::kBool); }
  Value* less(Value* a, Value* b) { return op("Less", {a, b}, DType::kBool); }
  Value* equal(Value* a, Value* b) { return op("Equal", {a, b}, DType::kBool); }
  Value* logical_not(Value* a) { return op("Not", {a}, DType::kBool); }
  Value* logical_and(Value* a, Value* b) { return op("And", {a, b}, DType::kBool); }
  Value* cast(Value* x, DType to);  // x itself when it already has that type; keeps x's shape
  Value* shape_of(Value* x) { return op("Shape", {x}, DType::kInt64); }
  Value* reshape(Value* x, Value* shape) { return same("Reshape", {x, shape}); }
  Value* expand(Value* x, Value* shape) { return same("Expand", {x, shape}); }
  Value* unsqueeze(Value* x, const std::vector<int64_t>& axes) { return same("Unsqueeze", {x, int64s(axes)}); }
  Value* transpose(Value* x, const std::vector<int64_t>& perm);
  Value* matmul(Value* a, Value* b) { return same("MatMul", {a, b}); }
  // ReduceSum (opset 13+: axes as an input); empty axes reduce everything.
  Value* reduce_sum(Value* x, const std::vector<int64_t>& axes, bool keepdims);
  Value* zeros_like(Value* x);  // ConstantOfShape(Shape(x)) of x's element type

  // A scalar (rank 0) constant of type t; fp16/bf16 values are rounded to nearest even.
  Value* scalar(double v, DType t);
  // A 1-D int64 constant.
  Value* int64s(const std::vector<int64_t>& v);
  Value* constant(Tensor t);

 private:
  Graph& g_;
  std::map<std::tuple<double, DType>, Value*> scalars_;
  std::map<std::vector<int64_t>, Value*> int_vectors_;
};

// A list of attributes (Attribute moves but does not copy, so no initializer lists).
template <class... A>
std::vector<Attribute> attrs(A&&... a) {
  std::vector<Attribute> v;
  (v.push_back(std::forward<A>(a)), ...);
  return v;
}

// Rank of a value's static type, or -1 when its shape is unknown.
int64_t rank_of(const Value* v);
// Normalises a possibly negative axis against a rank.
int64_t normalize_axis(int64_t axis, int64_t rank);
// The value's data when it is known before running: an initializer or a Constant node's output.
const Tensor* constant_tensor(const Value* v);
// A constant integer tensor's elements (int32/int64), nullopt when v is not constant.
std::optional<std::vector<int64_t>> constant_ints(const Value* v);

}  // namespace amp
