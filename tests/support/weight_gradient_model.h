// The backward pass of a Linear over [batch, time, features] as autodiff writes it for the
// weight and the bias: dW = Transpose(MatMul(Transpose(Reshape(x, [-1, in])), Reshape(dy, [-1, cols])))
// and db = ReduceSum(dy, axes [0, 1]) over the 3-D gradient. With cols = out (the real case) the
// CUDA backend computes both in one product with a bias-gradient epilogue; with other cols the
// matrix is not dy's rows and the sum must run on its own (the same fused unit, checked per plan).
#pragma once

#include <cstdint>
#include <string>

#include "graph/model.h"

namespace amp::test {

inline Model weight_gradient_model(DType t, int64_t batch, int64_t time, int64_t in, int64_t out, int64_t cols) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  const int64_t rows = batch * time * out / cols;
  Value* x = g.add_input("x", ValueType::tensor(t, Shape::of({rows, in})));
  Value* dy = g.add_input("dy", ValueType::tensor(t, Shape::of({batch, time, out})));
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    Tensor c(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t k = 0; k < v.size(); ++k) c.mutable_as<int64_t>()[k] = v[k];
    Node* n = g.add_node("Constant", {}, {name});
    n->set_attr(Attribute::of_tensor("value", c));
    n->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({static_cast<int64_t>(v.size())})));
    return n->output(0);
  };
  Node* xt = g.add_node("Transpose", {x}, {"xt"});
  xt->set_attr(Attribute::of_ints("perm", {1, 0}));
  Node* rows_of_dy = g.add_node("Reshape", {dy, ints("rows_shape", {-1, cols})}, {"dy_rows"});
  Node* mm = g.add_node("MatMul", {xt->output(0), rows_of_dy->output(0)}, {"dw_t"});
  Node* dw = g.add_node("Transpose", {mm->output(0)}, {"dw"});
  dw->set_attr(Attribute::of_ints("perm", {1, 0}));
  Node* db = g.add_node("ReduceSum", {dy, ints("axes", {0, 1})}, {"db"});
  db->set_attr(Attribute::of_int("keepdims", 0));
  xt->output(0)->set_type(ValueType::tensor(t, Shape::of({in, rows})));
  rows_of_dy->output(0)->set_type(ValueType::tensor(t, Shape::of({rows, cols})));
  mm->output(0)->set_type(ValueType::tensor(t, Shape::of({in, cols})));
  dw->output(0)->set_type(ValueType::tensor(t, Shape::of({cols, in})));
  db->output(0)->set_type(ValueType::tensor(t, Shape::of({out})));
  g.add_output(dw->output(0));
  g.add_output(db->output(0));
  return m;
}

}  // namespace amp::test
