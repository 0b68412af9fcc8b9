// Small hand-built models for the mixed-precision pass tests: each test builds a "before" model and,
// where it compares graphs, an "expected" model written out node by node with the names the passes
// are documented to choose.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"
#include "graph/onnx_io.h"
#include "graph/verify.h"

namespace amp::test {

// Attributes are move-only, so a braced list of them cannot initialise a vector.
template <class... A>
std::vector<Attribute> attrs(A&&... a) {
  std::vector<Attribute> v;
  (v.push_back(std::forward<A>(a)), ...);
  return v;
}

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) { m.set_opset_version("", opset); }

  Graph& graph() { return *m.graph; }

  Value* input(const std::string& name, DType t = DType::kFloat, std::vector<int64_t> shape = {2, 8}) {
    return m.graph->add_input(name, ValueType::tensor(t, Shape::of(shape)));
  }
  // An initializer filled with `fill` (fp32) or the given values.
  Value* weight(const std::string& name, std::vector<int64_t> shape = {8, 8}, float fill = 0.5f) {
    Tensor t(DType::kFloat, shape);
    t.name = name;
    for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<float>()[i] = fill;
    return m.graph->add_initializer(std::move(t));
  }
  Value* weight_values(const std::string& name, const std::vector<float>& values) {
    Tensor t(DType::kFloat, {static_cast<int64_t>(values.size())});
    t.name = name;
    std::copy(values.begin(), values.end(), t.mutable_as<float>());
    return m.graph->add_initializer(std::move(t));
  }
  Value* int64s(const std::string& name, const std::vector<int64_t>& values) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
    t.name = name;
    std::copy(values.begin(), values.end(), t.mutable_as<int64_t>());
    return m.graph->add_initializer(std::move(t));
  }

  // A node with one output named `out`, typed `t` with `shape` (the first input's shape if empty).
  Value* op(const std::string& op_type, const std::vector<Value*>& inputs, const std::string& out,
            DType t = DType::kFloat, std::vector<Attribute> attrs = {}, Graph* g = nullptr,
            std::optional<Shape> shape = std::nullopt) {
    Graph& into = g ? *g : *m.graph;
    Node* n = into.add_node(op_type, inputs, {out});
    n->name = out + "_node";
    for (auto& a : attrs) n->set_attr(std::move(a));
    if (!shape && !inputs.empty() && inputs[0] && inputs[0]->type().shape) shape = inputs[0]->type().shape;
    n->output(0)->set_type(ValueType::tensor(t, shape));
    return n->output(0);
  }
  // Named like its output, as insert_casts names the Casts it makes.
  Value* cast(Value* x, DType to, const std::string& out, Graph* g = nullptr) {
    Value* v = op("Cast", {x}, out, to, attrs(Attribute::of_int("to", static_cast<int64_t>(to))), g);
    v->producer()->name = out;
    return v;
  }
  void output(Value* v) { m.graph->add_output(v); }

  Node* producer(const std::string& value) const { return m.graph->lookup(value)->producer(); }

  Model m;
};

// Structural equality of two hand-built graphs, ignoring value_info order (the passes append their
// new values there; what matters is that every value has its type, checked by verify()).
inline std::string graph_diff(Model& actual, Model& expected) {
  auto strip = [](Model& m) {
    std::vector<Value*> saved = m.graph->value_info();
    m.graph->value_info().clear();
    return saved;
  };
  auto a = strip(actual), e = strip(expected);
  std::string diff = structural_diff(actual, expected);
  actual.graph->value_info() = a;
  expected.graph->value_info() = e;
  return diff;
}

inline void expect_sound(const Model& m) {
  const auto problems = verify(m);
  EXPECT_TRUE(problems.empty()) << problems[0];
  EXPECT_TRUE(m.graph->is_topologically_sorted());
}

}  // namespace amp::test
