// A Linear + ReLU layer, the next layer's product, and the layer's backward as autodiff writes it
// (passes/autodiff/elementwise_gradients.cc, matmul_gradients.cc), for `batch` rows of 16 inputs:
//   y = Relu(Gemm(x, w1, b1, transB)), z = Gemm(y, w2, transB)                  (forward)
//   dh = Where(Greater(y, 0), Gemm(dz, w2), 0), db = ReduceSum(dh, [0]),         (backward)
//   dw = Gemm(dh, x, transA)
// The CUDA backend keeps the ReLU's mask as cuBLASLt's bitmask between the forward product's
// RELU_AUX_BIAS epilogue and the backward product's DRELU_BGRAD. With `mask_read_as_bool` the
// mask is also cast to t and returned ("mask_t"), so it must stay a bool tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/half.h"
#include "graph/model.h"

namespace amp::test {

inline Model relu_layer_model(DType t, int64_t batch, bool mask_read_as_bool = false) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  auto type = [&](std::vector<int64_t> dims, DType e) { return ValueType::tensor(e, Shape::of(std::move(dims))); };
  Value* x = g.add_input("x", type({batch, 16}, t));
  Value* w1 = g.add_input("w1", type({32, 16}, t));
  Value* b1 = g.add_input("b1", type({32}, t));
  Value* w2 = g.add_input("w2", type({8, 32}, t));
  Value* dz = g.add_input("dz", type({batch, 8}, t));
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out, std::vector<int64_t> dims,
                  DType e) {
    Node* n = g.add_node(op, in, {out});
    n->output(0)->set_type(type(std::move(dims), e));
    return n;
  };
  auto constant = [&](const std::string& name, Tensor c) {
    Node* n = node("Constant", {}, name, c.dims, c.dtype);
    n->set_attr(Attribute::of_tensor("value", std::move(c)));
    return n->output(0);
  };
  Tensor zero_value(t, {});
  if (t == DType::kFloat) *zero_value.mutable_as<float>() = 0.0f;
  else *zero_value.mutable_as<uint16_t>() = t == DType::kFloat16 ? fp32_to_fp16(0.0f) : fp32_to_bf16(0.0f);
  Value* zero = constant("zero", zero_value);
  Tensor rows_axis(DType::kInt64, {1});
  *rows_axis.mutable_as<int64_t>() = 0;
  Value* axes = constant("axes", rows_axis);

  Node* h = node("Gemm", {x, w1, b1}, "h", {batch, 32}, t);
  h->set_attr(Attribute::of_int("transB", 1));
  Value* y = node("Relu", {h->output(0)}, "y", {batch, 32}, t)->output(0);
  Node* z = node("Gemm", {y, w2}, "z", {batch, 8}, t);
  z->set_attr(Attribute::of_int("transB", 1));
  Value* mask = node("Greater", {y, zero}, "mask", {batch, 32}, DType::kBool)->output(0);
  Value* dy = node("Gemm", {dz, w2}, "dy", {batch, 32}, t)->output(0);
  Value* dh = node("Where", {mask, dy, zero}, "dh", {batch, 32}, t)->output(0);
  Node* db = node("ReduceSum", {dh, axes}, "db", {32}, t);
  db->set_attr(Attribute::of_int("keepdims", 0));
  Node* dw = node("Gemm", {dh, x}, "dw", {32, 16}, t);
  dw->set_attr(Attribute::of_int("transA", 1));
  for (Value* v : {y, z->output(0), dh, db->output(0), dw->output(0)}) g.add_output(v);
  if (mask_read_as_bool) {
    Node* cast = node("Cast", {mask}, "mask_t", {batch, 32}, t);
    cast->set_attr(Attribute::of_int("to", static_cast<int64_t>(t)));
    g.add_output(cast->output(0));
  }
  return m;
}

}  // namespace amp::test
