#include "passes/fusion/recognize_layer_norm.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "passes/fusion/chain_pattern.h"
#include "passes/fusion/replace_chain.h"

namespace amp {
namespace {

// v is a rank-0 constant of type t; its value.
std::optional<double> scalar(const Value* v, DType t) {
  const Tensor* c = constant_data(v);
  if (!c || c->dtype != t || !c->dims.empty() || c->numel() != 1) return std::nullopt;
  return c->element(0);
}

// v is a constant of type t and shape [d].
bool is_vector(const Value* v, DType t, int64_t d) {
  const Tensor* c = constant_data(v);
  return c && c->dtype == t && c->dims == std::vector<int64_t>{d};
}

// n is a binary node; tries f(a, b) with its operands in both orders.
template <class F>
bool either_order(Node* n, F&& f) {
  if (!n || n->inputs().size() != 2) return false;
  return f(n->input(0), n->input(1)) || f(n->input(1), n->input(0));
}

struct Match {
  Value* x = nullptr;
  Value* scale = nullptr;
  Value* bias = nullptr;
  float epsilon = 0;
  std::vector<Node*> nodes;  // the chain, producers before readers; the last one computes y
};

class Matcher {
 public:
  // The chain starting at ReduceMean node `mean`, if it is a LayerNorm over the last axis.
  std::optional<Match> at(Node* mean) {
    m_ = Match{};
    Value* x = mean->input(0);
    t_ = x ? x->dtype() : DType::kUndefined;
    if (!is_float(t_)) return std::nullopt;
    // x's rank and last dim where shape inference knows them (often it does not in a transformer,
    // after a Reshape to computed dims); the scale's size then gives D.
    const std::optional<Shape>& shape = x->type().shape;
    if (shape && shape->rank() == 0) return std::nullopt;
    rank_ = shape ? static_cast<int64_t>(shape->rank()) : -1;
    std::optional<int64_t> last_dim = shape ? shape->dims.back().value : std::nullopt;
    if (!last_axis_mean(mean, x)) return std::nullopt;
    m_.x = x;
    // d = x - mean, read by Pow and Div only: one Sub, or one for each (PyTorch 1.1's export of
    // BERT's LayerNorm, (x - u).pow(2).mean() and (x - u) / sqrt(...), which ONNX Runtime's
    // optimizer keeps: bert_toy_optimized.onnx).
    if (mean->output(0)->is_output()) return std::nullopt;
    std::vector<Node*> subs;
    for (const Use& u : mean->output(0)->uses()) subs.push_back(u.node);
    if (subs.empty() || subs.size() > 2) return std::nullopt;
    Node* pow = nullptr;
    Node* div = nullptr;
    size_t reads = 0;
    for (Node* sub : subs) {
      if (!is_op(sub, "Sub") || sub->input(0) != x || sub->input(1) != mean->output(0) || !typed(sub)) return std::nullopt;
      const Value* d = sub->output(0);
      if (d->is_output()) return std::nullopt;
      reads += d->uses().size();
      for (const Use& u : d->uses()) {
        if (is_op(u.node, "Pow") && u.index == 0) pow = u.node;
        if (is_op(u.node, "Div") && u.index == 0) div = u.node;
      }
    }
    if (reads != 2) return std::nullopt;
    if (!pow || !div || !typed(pow) || !typed(div)) return std::nullopt;
    const Value* exponent = pow->input(1);
    const std::optional<double> two = scalar(exponent, exponent ? exponent->dtype() : t_);
    if (!two || *two != 2.0) return std::nullopt;
    // var = mean of d^2 over the last axis; + eps; sqrt; d / that.
    Node* var = sole_reader(pow->output(0));
    if (!is_op(var, "ReduceMean") || !typed(var) || !last_axis_mean(var, pow->output(0))) return std::nullopt;
    Node* plus_eps = sole_reader(var->output(0));
    if (!is_op(plus_eps, "Add") || !typed(plus_eps)) return std::nullopt;
    const bool eps_ok = either_order(plus_eps, [&](Value* a, Value* c) {
      const std::optional<double> e = scalar(c, t_);
      if (a != var->output(0) || !e || !(*e >= 0)) return false;
      m_.epsilon = static_cast<float>(*e);
      return true;
    });
    if (!eps_ok) return std::nullopt;
    Node* sqrt = sole_reader(plus_eps->output(0));
    if (!is_op(sqrt, "Sqrt") || !typed(sqrt) || sole_reader(sqrt->output(0)) != div || div->input(1) != sqrt->output(0))
      return std::nullopt;
    // * scale, + bias.
    Node* mul = sole_reader(div->output(0));
    if (!is_op(mul, "Mul") || !typed(mul)) return std::nullopt;
    int64_t d_size = 0;
    const bool scaled = either_order(mul, [&](Value* a, Value* c) {
      const Tensor* scale = constant_data(c);
      if (a != div->output(0) || !scale || scale->dims.size() != 1) return false;
      d_size = scale->dims[0];
      if ((last_dim && *last_dim != d_size) || !is_vector(c, t_, d_size)) return false;
      m_.scale = c;
      return true;
    });
    if (!scaled) return std::nullopt;
    Node* add = sole_reader(mul->output(0));
    if (!is_op(add, "Add") || !typed(add)) return std::nullopt;
    const bool biased = either_order(add, [&](Value* a, Value* c) {
      if (a != mul->output(0) || !is_vector(c, t_, d_size)) return false;
      m_.bias = c;
      return true;
    });
    if (!biased) return std::nullopt;
    m_.nodes = {mean};
    m_.nodes.insert(m_.nodes.end(), subs.begin(), subs.end());
    for (Node* n : {pow, var, plus_eps, sqrt, div, mul, add}) m_.nodes.push_back(n);
    return m_;
  }

 private:
  // n's output is of the chain's type.
  bool typed(const Node* n) const { return n->output(0)->dtype() == t_; }

  // ReduceMean(in) over the last axis with keepdims 1: axes [-1] or [rank-1], as the attribute
  // (opsets up to 17) or a constant second input (18 on).
  bool last_axis_mean(const Node* n, const Value* in) const {
    if (n->input(0) != in || n->attr_int("keepdims", 1) != 1 || n->output(0)->dtype() != t_) return false;
    std::vector<int64_t> axes = n->attr_ints("axes");
    if (n->inputs().size() > 1 && n->input(1)) {
      const Tensor* c = constant_data(n->input(1));
      if (!c || c->dtype != DType::kInt64 || c->numel() != 1 || !axes.empty()) return false;
      axes = {static_cast<int64_t>(c->element(0))};
    }
    return axes.size() == 1 && (axes[0] == -1 || (rank_ > 0 && axes[0] == rank_ - 1));
  }

  Match m_;
  DType t_ = DType::kUndefined;
  int64_t rank_ = 0;
};

// "/encoder/layers.0/norm1/Add_1" -> "/encoder/layers.0/norm1/LayerNormalization".
std::string layer_norm_node_name(const std::string& last) {
  const size_t slash = last.rfind('/');
  if (slash == std::string::npos) return last.empty() ? "LayerNormalization" : last + "_layer_norm";
  return last.substr(0, slash + 1) + "LayerNormalization";
}

}  // namespace

bool RecognizeLayerNormPass::run(Model& m) {
  stats_.clear();
  if (m.opset_version("") < 17) return false;
  Graph& g = *m.graph;
  std::unordered_set<Node*> removed;
  std::unordered_set<std::string> names;  // node names stay unique: reports and --explain use them
  for (const Node* n : g.nodes()) names.insert(n->name);
  Matcher matcher;
  for (Node* mean : g.node_vector()) {
    if (removed.count(mean) || !is_op(mean, "ReduceMean")) continue;
    std::optional<Match> match = matcher.at(mean);
    if (!match) continue;
    Node* last = match->nodes.back();
    const std::string name = last->output(0)->name();
    Node* ln = g.add_node("LayerNormalization", {match->x, match->scale, match->bias}, {g.fresh_name(name + "_ln")}, "",
                          last);
    ln->name = layer_norm_node_name(last->name);
    for (int k = 1; names.count(ln->name); ++k) ln->name = layer_norm_node_name(last->name) + "_" + std::to_string(k);
    names.insert(ln->name);
    ln->set_attr(Attribute::of_int("axis", -1));
    ln->set_attr(Attribute::of_float("epsilon", match->epsilon));
    replace_chain(g, match->nodes, ln, match->x, removed);
    count("decomposed LayerNorms recognised");
  }
  return !removed.empty();
}

}  // namespace amp
