// A Linear + GELU (tanh form) layer, the next layer's product, and the layer's backward as
// autodiff writes it (ai.onnx_amp Gelu / GeluGrad), for `batch` rows of 16 inputs and `hidden`
// units:
//   h = Gemm(x, w1, b1, transB), y = Gelu(h), z = Gemm(y, w2, transB)            (forward)
//   dh = GeluGrad(Gemm(dz, w2), h), db = ReduceSum(dh, [0]), dw = Gemm(dh, x, transA)  (backward)
// The CUDA backend runs the forward product with cuBLASLt's GELU_AUX_BIAS (writing y and h) and
// the backward one with DGELU_BGRAD (reading h) when hidden is a multiple of 8; h is a tensor of
// its type either way, which the model also returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/model.h"

namespace amp::test {

inline Model gelu_layer_model(DType t, int64_t batch, int64_t hidden = 32) {
  Model m;
  m.opset_imports = {{"", 17}, {kAmpDomain, kAmpDomainVersion}};
  Graph& g = *m.graph;
  auto type = [&](std::vector<int64_t> dims, DType e) { return ValueType::tensor(e, Shape::of(std::move(dims))); };
  Value* x = g.add_input("x", type({batch, 16}, t));
  Value* w1 = g.add_input("w1", type({hidden, 16}, t));
  Value* b1 = g.add_input("b1", type({hidden}, t));
  Value* w2 = g.add_input("w2", type({8, hidden}, t));
  Value* dz = g.add_input("dz", type({batch, 8}, t));
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out, std::vector<int64_t> dims,
                  DType e, const std::string& domain = "") {
    Node* n = g.add_node(op, in, {out}, domain);
    n->output(0)->set_type(type(std::move(dims), e));
    if (!domain.empty()) n->set_attr(Attribute::of_string("approximate", "tanh"));
    return n;
  };
  Tensor rows_axis(DType::kInt64, {1});
  *rows_axis.mutable_as<int64_t>() = 0;
  Node* axes = node("Constant", {}, "axes", {1}, DType::kInt64);
  axes->set_attr(Attribute::of_tensor("value", rows_axis));

  Node* h = node("Gemm", {x, w1, b1}, "h", {batch, hidden}, t);
  h->set_attr(Attribute::of_int("transB", 1));
  Value* y = node("Gelu", {h->output(0)}, "y", {batch, hidden}, t, kAmpDomain)->output(0);
  Node* z = node("Gemm", {y, w2}, "z", {batch, 8}, t);
  z->set_attr(Attribute::of_int("transB", 1));
  Value* dy = node("Gemm", {dz, w2}, "dy", {batch, hidden}, t)->output(0);
  Value* dh = node("GeluGrad", {dy, h->output(0)}, "dh", {batch, hidden}, t, kAmpDomain)->output(0);
  Node* db = node("ReduceSum", {dh, axes->output(0)}, "db", {hidden}, t);
  db->set_attr(Attribute::of_int("keepdims", 0));
  Node* dw = node("Gemm", {dh, x}, "dw", {hidden, 16}, t);
  dw->set_attr(Attribute::of_int("transA", 1));
  for (Value* v : {h->output(0), y, z->output(0), dh, db->output(0), dw->output(0)}) g.add_output(v);
  return m;
}

}  // namespace amp::test
