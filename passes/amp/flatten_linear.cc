#include "passes/amp/flatten_linear.h"

#include <unordered_set>

#include "graph/onnx_reinfer.h"
#include "passes/amp/colour.h"
#include "passes/fusion/chain_pattern.h"

namespace amp {

namespace {

// The static dims of v's shape, or nullopt when its rank or any dim is unknown.
std::optional<std::vector<int64_t>> static_dims(const Value* v) {
  return v->type().is_tensor() && v->type().shape ? v->type().shape->static_dims() : std::nullopt;
}

std::optional<size_t> rank_of(const Value* v) {
  if (!v->type().is_tensor() || !v->type().shape) return std::nullopt;
  return v->type().shape->rank();
}

class Flattener {
 public:
  Flattener(Model& m, const AmpDecisions& d) : m_(m), g_(*m.graph), d_(d) {
    for (const Node* n : g_.nodes()) names_.insert(n->name);
  }

  bool run(int64_t& flattened) {
    for (Node* mm : g_.node_vector())
      if (Node* add = candidate(mm)) {
        flatten(mm, add);
        ++flattened;
      }
    if (flattened) {
      g_.topological_sort();
      reinfer_types(m_, edited_);
    }
    return flattened > 0;
  }

 private:
  bool low(const Node* n) const {
    const NodeDecision* nd = d_.find(n);
    return nd && nd->decision.precision == Precision::kLow && nd->decision.rule != Rule::kCast;
  }

  Node* candidate(Node* mm) const {
    if (!is_op(mm, "MatMul") || mm->inputs().size() != 2 || !low(mm)) return nullptr;
    Value* a = mm->input(0);
    const Value* w = mm->input(1);
    if (!a || !w || a->dtype() != DType::kFloat || w->dtype() != DType::kFloat) return nullptr;
    const auto wdims = static_dims(w);
    if (!wdims || wdims->size() != 2) return nullptr;
    if (const auto r = rank_of(a); r && *r < 3) return nullptr;
    if (a->has_initializer() || (a->producer() && low(a->producer()))) return nullptr;
    if (!a->producer() && !a->is_input()) return nullptr;
    Node* add = sole_reader(mm->output(0));
    if (!is_op(add, "Add") || add->inputs().size() != 2 || !low(add) || add->output(0)->is_output()) return nullptr;
    const Value* bias = add->input(add->input(0) == mm->output(0) ? 1 : 0);
    const auto bdims = static_dims(bias);
    const int64_t n = (*wdims)[1];
    if (!bdims || !(*bdims == std::vector<int64_t>{n} || *bdims == std::vector<int64_t>{1, n})) return nullptr;
    return add;
  }

  std::string node_name(const std::string& base) {
    std::string name = base;
    for (int k = 2; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  Value* int64_initializer(const std::string& base, const std::vector<int64_t>& values) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.mutable_as<int64_t>());
    t.name = g_.fresh_name(base);
    return g_.add_initializer(std::move(t));
  }

  Node* node(const std::string& op, const std::vector<Value*>& inputs, const std::string& name, ValueType type) {
    Node* n = g_.add_node(op, inputs, {g_.fresh_name(name)});
    n->name = node_name(name);
    n->output(0)->set_type(std::move(type));
    g_.value_info().push_back(n->output(0));
    edited_.push_back(n->output(0));
    return n;
  }

  void flatten(Node* mm, Node* add) {
    Value* a = mm->input(0);
    const std::vector<int64_t> wdims = static_dims(mm->input(1)).value();  // [K, N]: candidate() checked
    const int64_t k = wdims[0], n = wdims[1];
    const auto adims = static_dims(a);
    std::optional<int64_t> rows;
    if (adims) {
      rows = 1;
      for (size_t i = 0; i + 1 < adims->size(); ++i) *rows *= (*adims)[i];
    }
    // [rows, cols] when A's shape gives the rows; else no shape here, and reinfer_types() gives what
    // ONNX's inference knows (a dim left unnamed here would be named by the next import).
    const auto rows_of = [&](DType t, int64_t cols) {
      return rows ? ValueType::tensor(t, Shape::of({*rows, cols})) : ValueType::tensor(t);
    };

    Node* flat = node("Flatten", {a}, mm->name + "/flatten", rows_of(DType::kFloat, k));
    flat->set_attr(Attribute::of_int("axis", -1));
    mm->set_input(0, flat->output(0));
    mm->output(0)->set_type(rows_of(mm->output(0)->dtype(), n));
    edited_.push_back(mm->output(0));

    // The Add's result keeps its name on the Reshape that restores its shape.
    Value* y = add->output(0);
    const ValueType y_type = y->type();
    const std::string y_name = y->name();
    g_.rename_value(y, g_.fresh_name(y_name + "_rows"));
    y->set_type(rows_of(y->dtype(), n));
    edited_.push_back(y);

    Value* dims = nullptr;
    if (adims) {
      std::vector<int64_t> out(adims->begin(), adims->end() - 1);
      out.push_back(n);
      dims = int64_initializer(y_name + "_dims", out);
    } else {
      const ValueType ints = ValueType::tensor(DType::kInt64);  // shapes from reinfer_types()
      Node* lead = node("Shape", {a}, add->name + "/leading_dims", ints);
      lead->set_attr(Attribute::of_int("end", -1));
      Node* cat = node("Concat", {lead->output(0), int64_initializer(y_name + "_n", {n})}, add->name + "/dims", ints);
      cat->set_attr(Attribute::of_int("axis", 0));
      dims = cat->output(0);
    }
    const std::vector<Use> readers = y->uses();
    Node* back = g_.add_node("Reshape", {y, dims}, {y_name});
    back->name = node_name(add->name + "/unflatten");
    back->output(0)->set_type(y_type);
    g_.value_info().push_back(back->output(0));
    edited_.push_back(back->output(0));
    for (const Use& u : readers) u.node->set_input(u.index, back->output(0));
  }

  Model& m_;
  Graph& g_;
  const AmpDecisions& d_;
  std::unordered_set<std::string> names_;
  std::vector<Value*> edited_;  // values whose types reinfer_types() settles
};

}  // namespace

bool FlattenLinearPass::run(Model& m) {
  stats_.clear();
  if (policy_.cast_placement != CastPlacement::kCompute || m.opset_version("") < 15) return false;
  const AmpDecisions decisions = colour(m, policy_);
  int64_t flattened = 0;
  const bool changed = Flattener(m, decisions).run(flattened);
  if (flattened) count("linear layers flattened", flattened);
  return changed;
}

}  // namespace amp
