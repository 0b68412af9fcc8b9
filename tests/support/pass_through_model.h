// Elementwise ops on both sides of a pass-through (a SumToShape over nothing, as autodiff writes
// one after most gradient ops):
//   u = Where(c, a, b) [2,3];  v = SumToShape(u, [2,3]);  r = Neg(v) [2,3];  w = Mul(v, z) [4,2,3]
// Where and Neg fuse through v; Mul, of another shape, is a kernel of its own that reads u, so u
// must leave the first kernel, and the Mul must run after it. SumToShape itself runs nothing.
#pragma once

#include "graph/amp_ops.h"
#include "graph/model.h"

namespace amp::test {

inline Model pass_through_model(DType t) {
  Model m;
  m.opset_imports = {{"", 17}, {kAmpDomain, kAmpDomainVersion}};
  Graph& g = *m.graph;
  Value* c = g.add_input("c", ValueType::tensor(DType::kBool, Shape::of({2, 3})));
  Value* a = g.add_input("a", ValueType::tensor(t, Shape::of({2, 3})));
  Value* b = g.add_input("b", ValueType::tensor(t, Shape::of({2, 3})));
  Value* z = g.add_input("z", ValueType::tensor(t, Shape::of({4, 2, 3})));
  Tensor dims(DType::kInt64, {2});
  dims.mutable_as<int64_t>()[0] = 2;
  dims.mutable_as<int64_t>()[1] = 3;
  Node* shape = g.add_node("Constant", {}, {"shape"});
  shape->set_attr(Attribute::of_tensor("value", dims));
  shape->output(0)->set_type(ValueType::tensor(DType::kInt64, Shape::of({2})));
  Node* u = g.add_node("Where", {c, a, b}, {"u"});
  Node* v = g.add_node("SumToShape", {u->output(0), shape->output(0)}, {"v"}, kAmpDomain);
  Node* r = g.add_node("Neg", {v->output(0)}, {"r"});
  Node* w = g.add_node("Mul", {v->output(0), z}, {"w"});
  for (Node* n : {u, v, r}) n->output(0)->set_type(ValueType::tensor(t, Shape::of({2, 3})));
  w->output(0)->set_type(ValueType::tensor(t, Shape::of({4, 2, 3})));
  g.add_output(r->output(0));
  g.add_output(w->output(0));
  return m;
}

}  // namespace amp::test
