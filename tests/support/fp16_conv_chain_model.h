// A small fp16 convolution chain as amp-rewrite leaves an image model's inference: x (fp32
// [2, 8, 12, 12]) -> Cast to fp16 -> Conv 3x3 (w3, an fp16 initializer, pads 1) -> Relu -> MaxPool
// 2x2/2 -> Conv 1x1 (w1) -> [Flatten ->] Cast to fp32 -> y. On the cuda backend its convolutions
// and pool compute channels-last (backends/cuda/channels_last.h): the Casts transpose as they
// convert, the 3x3 filter (an initializer, stored as ONNX lays it out) is transposed around its
// convolution, and with the Flatten (a view: its input stays in ONNX's layout) the 1x1
// convolution's result is transposed back after it.
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"
#include "graph/onnx_io.h"
#include "tests/support/parity.h"

namespace amp::test {

inline Model fp16_conv_chain_model(bool flatten) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  g.name = "conv_chain";
  auto weight = [&](const std::string& name, std::vector<int64_t> dims) {
    Tensor t = random_tensor(DType::kFloat16, dims, 7, -1, 1);
    t.name = name;
    return g.add_initializer(t);
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& out) {
    Node* n = g.add_node(op, in, {out});
    n->name = out;
    return n;
  };
  Value* x = g.add_input("x", ValueType::tensor(DType::kFloat, Shape::of({2, 8, 12, 12})));
  Node* cast = node("Cast", {x}, "x16");
  cast->set_attr(Attribute::of_int("to", 10));
  Node* conv = node("Conv", {cast->output(0), weight("w3", {16, 8, 3, 3})}, "conv3");
  conv->set_attr(Attribute::of_ints("pads", {1, 1, 1, 1}));
  Node* relu = node("Relu", {conv->output(0)}, "relu");
  Node* pool = node("MaxPool", {relu->output(0)}, "pool");
  pool->set_attr(Attribute::of_ints("kernel_shape", {2, 2}));
  pool->set_attr(Attribute::of_ints("strides", {2, 2}));
  Value* last = node("Conv", {pool->output(0), weight("w1", {4, 16, 1, 1})}, "conv1")->output(0);
  std::vector<int64_t> y_dims = {2, 4, 6, 6};
  if (flatten) {
    last = node("Flatten", {last}, "flat")->output(0);
    y_dims = {2, 4 * 6 * 6};
  }
  Node* back = node("Cast", {last}, "y");
  back->set_attr(Attribute::of_int("to", 1));
  back->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape::of(y_dims)));
  g.add_output(back->output(0));
  // Read back as a file is read: every value typed by ONNX's shape inference.
  return load_model_from_bytes(serialize_model(m), "conv_chain.onnx", ".");
}

}  // namespace amp::test
