// A language model's head in miniature, as torch exports GPT-2's: tokens [N, T] -> Gather from an
// embedding [vocab, width] -> LayerNormalization -> MatMul by a [width, vocab] weight -> Add a
// [vocab] bias -> scores [N, T, vocab]. With an odd vocabulary (GPT-2's 50257) the scores' rows
// are not a multiple of 16 bytes long: the CUDA backend stores them and their gradient with padded
// rows (backends/cuda/row_pitch.h) when it trains the model.
#pragma once

#include <cstdint>

#include "graph/model.h"
#include "tests/support/random_initializer.h"

namespace amp::test {

inline Model lm_head_model(int64_t vocab, int64_t width) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = *m.graph;
  uint32_t seed = 90;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, float range) {
    return random_initializer(g, name, std::move(shape), seed++, range);
  };
  const Dim n = Dim::symbol("N"), t = Dim::symbol("T");
  auto typed = [&](Node* node, std::vector<Dim> dims) {
    node->output(0)->set_type(ValueType::tensor(DType::kFloat, Shape{std::move(dims)}));
    return node->output(0);
  };
  Value* tokens = g.add_input("tokens", ValueType::tensor(DType::kInt64, Shape{{n, t}}));
  Value* h = typed(g.add_node("Gather", {param("tok_emb.weight", {vocab, width}, 1.0f), tokens}, {"h"}),
                   {n, t, Dim::fixed(width)});
  Node* ln = g.add_node("LayerNormalization", {h, param("ln_f.weight", {width}, 1.0f), param("ln_f.bias", {width}, 0.1f)},
                        {"h_norm"});
  ln->set_attr(Attribute::of_int("axis", -1));
  Value* normed = typed(ln, {n, t, Dim::fixed(width)});
  Value* product = typed(g.add_node("MatMul", {normed, param("head.weight", {width, vocab}, 0.5f)}, {"head_product"}),
                         {n, t, Dim::fixed(vocab)});
  Value* logits = typed(g.add_node("Add", {param("head.bias", {vocab}, 0.1f), product}, {"logits"}), {n, t, Dim::fixed(vocab)});
  g.add_output(logits);
  return m;
}

}  // namespace amp::test
