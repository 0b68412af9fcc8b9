#include "passes/autodiff/complete_shapes.h"

#include <algorithm>
#include <unordered_set>

#include "passes/graph_builder.h"

namespace amp {

namespace {

Shape unknown_dims(int64_t rank) { return Shape{std::vector<Dim>(static_cast<size_t>(rank))}; }

// Ops whose first output has their first input's shape.
const std::unordered_set<std::string>& shape_preserving() {
  static const std::unordered_set<std::string> ops = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs",
      "Identity", "Cast", "Dropout", "Softmax", "LogSoftmax", "Clip", "Not", "LayerNormalization",
      "BatchNormalization", "Trilu", "ai.onnx_amp:Gelu"};
  return ops;
}

const std::unordered_set<std::string>& broadcasting() {
  static const std::unordered_set<std::string> ops = {"Add", "Sub",  "Mul",     "Div",  "Pow", "Min", "Max",
                                                      "Where", "Equal", "Less", "Greater", "And"};
  return ops;
}

// The first output's shape as far as the op alone tells it; nullopt when it does not.
std::optional<Shape> output_shape(const Node& n) {
  const std::string op = n.qualified_op_type();
  Value* x = n.input(0);
  const int64_t rx = x ? rank_of(x) : -1;
  if (shape_preserving().count(op)) return rx >= 0 ? x->type().shape : std::nullopt;
  if (broadcasting().count(op)) {
    int64_t r = 0;
    for (Value* v : n.inputs()) {
      if (!v || rank_of(v) < 0) return std::nullopt;
      r = std::max(r, rank_of(v));
    }
    return unknown_dims(r);
  }
  if (op == "Slice") return rx >= 0 ? std::optional<Shape>(unknown_dims(rx)) : std::nullopt;
  if (op == "Transpose") {
    const auto perm = n.attr_ints("perm");
    if (perm.empty() && rx < 0) return std::nullopt;
    Shape s = unknown_dims(perm.empty() ? rx : static_cast<int64_t>(perm.size()));
    if (rx >= 0)
      for (size_t i = 0; i < s.dims.size(); ++i)
        s.dims[i] = x->type().shape->dims[static_cast<size_t>(perm.empty() ? rx - 1 - static_cast<int64_t>(i) : perm[i])];
    return s;
  }
  if (op == "MatMul") {
    const int64_t ra = rx, rb = rank_of(n.input(1));
    if (ra < 1 || rb < 1) return std::nullopt;
    return unknown_dims(ra == 1 || rb == 1 ? std::max(ra, rb) - 1 : std::max(ra, rb));
  }
  if (op == "Reshape") {
    const auto& s = n.input(1)->type().shape;
    if (s && s->rank() == 1 && s->dims[0].is_static()) return unknown_dims(*s->dims[0].value);
  }
  return std::nullopt;
}

}  // namespace

void complete_shapes(Graph& g) {
  for (Node* n : g.nodes()) {
    Value* y = n->output(0);
    if (!y || rank_of(y) >= 0) continue;
    if (auto s = output_shape(*n)) {
      ValueType t = y->type();
      t.kind = ValueType::Kind::kTensor;
      t.shape = std::move(s);
      y->set_type(std::move(t));
    }
  }
}

}  // namespace amp
