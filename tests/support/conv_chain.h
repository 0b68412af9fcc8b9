// A convolution and what may follow it, x -> Conv(W[, B]) [-> Add(z)] [-> Cast to fp32]
// [-> activation], every value typed with its static shape (as an export's shape inference leaves
// them), and random feeds: what the cuda backend's convolution fusion is matched and checked on.
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"
#include "tests/support/one_node.h"
#include "tests/support/parity.h"

namespace amp::test {

struct ConvChainSpec {
  DType dtype = DType::kFloat;
  // Kernels of odd size, padded by half of it on both sides with stride 1: Y has X's spatial dims.
  std::vector<int64_t> x_dims = {2, 4, 7, 7}, w_dims = {6, 4, 3, 3};
  int64_t group = 1;
  bool bias = true;
  std::vector<int64_t> residual_dims;  // empty: no Add; y_dims(): a residual; else a broadcast Add
  std::string activation;              // "", "Relu" or "LeakyRelu"
  bool conv_output_is_graph_output = false;
  bool widen_before_activation = false;  // a Cast to fp32 between the Conv (or Add) and the activation
  uint32_t seed = 1;

  std::vector<int64_t> y_dims() const {
    std::vector<int64_t> y = x_dims;
    y[1] = w_dims[0];
    return y;
  }
};

struct ConvChain {
  Model m;
  Feeds feeds;
  std::string output;
};

// Inputs: x in [-1, 1), W in [-1/4, 1/4), B and z in [-1, 1): the sum a convolution of t taps
// adds to its bias stays within t / 4 + 1.
inline ConvChain conv_chain(const ConvChainSpec& c) {
  ConvChain out;
  out.m.opset_imports = {{"", 17}};
  Graph& g = *out.m.graph;
  auto input = [&](const std::string& name, const std::vector<int64_t>& dims, float range, uint32_t seed) {
    out.feeds.push_back({name, random_tensor(c.dtype, dims, c.seed * 16 + seed, -range, range)});
    return g.add_input(name, ValueType::tensor(c.dtype, Shape::of(dims)));
  };
  auto typed = [&](Node* n, DType t, const std::vector<int64_t>& dims) {
    n->output(0)->set_type(ValueType::tensor(t, Shape::of(dims)));
    return n->output(0);
  };
  std::vector<Value*> conv_in = {input("x", c.x_dims, 1.0f, 0), input("w", c.w_dims, 0.25f, 1)};
  if (c.bias) conv_in.push_back(input("b", {c.w_dims[0]}, 1.0f, 2));
  Node* conv = g.add_node("Conv", conv_in, {"y"});
  std::vector<int64_t> pads;
  for (int side = 0; side < 2; ++side)
    for (size_t d = 2; d < c.w_dims.size(); ++d) pads.push_back(c.w_dims[d] / 2);
  conv->set_attr(Attribute::of_ints("pads", pads));
  conv->set_attr(Attribute::of_int("group", c.group));
  Value* v = typed(conv, c.dtype, c.y_dims());
  if (c.conv_output_is_graph_output) g.add_output(v);
  if (!c.residual_dims.empty()) {
    Value* z = input("z", c.residual_dims, 1.0f, 3);
    v = typed(g.add_node("Add", {v, z}, {"sum"}), c.dtype, c.y_dims());
  }
  DType t = c.dtype;
  if (c.widen_before_activation) {
    Node* cast = g.add_node("Cast", {v}, {"wide"});
    cast->set_attr(Attribute::of_int("to", static_cast<int64_t>(DType::kFloat)));
    t = DType::kFloat;
    v = typed(cast, t, c.y_dims());
  }
  if (!c.activation.empty()) v = typed(g.add_node(c.activation, {v}, {"act"}), t, c.y_dims());
  g.add_output(v);
  out.output = v->name();
  return out;
}

}  // namespace amp::test
