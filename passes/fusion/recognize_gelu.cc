#include "passes/fusion/recognize_gelu.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/gelu.h"
#include "graph/half.h"
#include "passes/fusion/chain_pattern.h"
#include "passes/fusion/replace_chain.h"

namespace amp {
namespace {

// `exact` as a value of type t would hold it: rounded once.
double in_type(double exact, DType t) {
  switch (t) {
    case DType::kFloat: return static_cast<float>(exact);
    case DType::kFloat16: return fp16_to_fp32(fp32_to_fp16(static_cast<float>(exact)));
    case DType::kBFloat16: return bf16_to_fp32(fp32_to_bf16(static_cast<float>(exact)));
    default: return exact;
  }
}

// v is a scalar Constant node of type t equal to `exact` in that type. Rank 0 only, so the
// constant cannot broadcast the result to a higher rank. Initializers do not count: in a
// training graph a float initializer may be a parameter.
bool is_constant(const Value* v, double exact, DType t) {
  const Node* p = v ? v->producer() : nullptr;
  if (!is_op(p, "Constant") || v->dtype() != t) return false;
  if (const Attribute* a = p->attr("value_float")) return t == DType::kFloat && a->f == static_cast<float>(exact);
  const Attribute* a = p->attr("value");
  if (!a || a->kind != AttrKind::kTensor || a->t.numel() != 1 || !a->t.dims.empty()) return false;
  return a->t.element(0) == in_type(exact, t);
}

struct Match {
  Value* x = nullptr;
  GeluKind kind = GeluKind::kExact;
  std::vector<Node*> nodes;  // the chain, producers before readers; the last one computes y
};

// n is a binary node; tries f(n, a, b) with its operands in both orders.
template <class F>
bool either_order(Node* n, F&& f) {
  if (!n || n->inputs().size() != 2) return false;
  return f(n->input(0), n->input(1)) || f(n->input(1), n->input(0));
}

class Matcher {
 public:
  // The chain through Erf or Tanh node `e`, if it is a GELU.
  std::optional<Match> at(Node* e) {
    m_ = Match{};
    t_ = e->output(0)->dtype();
    if (!is_float(t_) || !e->input(0) || e->input(0)->dtype() != t_) return std::nullopt;
    const bool ok = is_op(e, "Erf") ? erf_argument(e) : tanh_argument(e);
    if (!ok) return std::nullopt;
    m_.nodes.push_back(e);
    if (!tail(e->output(0))) return std::nullopt;
    return m_;
  }

 private:
  // The intermediate v, of the chain's type, that only `reader` reads; its producer, if it is op.
  Node* feeds(const Value* v, const Node* reader, const char* op) {
    if (!v || v->dtype() != t_ || sole_reader(v) != reader) return nullptr;
    Node* p = v->producer();
    return is_op(p, op) ? p : nullptr;
  }

  // x / sqrt 2 or x * (1 / sqrt 2) (either order).
  bool erf_argument(Node* e) {
    m_.kind = GeluKind::kExact;
    if (Node* d = feeds(e->input(0), e, "Div"); d && is_constant(d->input(1), 1.41421356237309504880, t_)) {
      m_.x = d->input(0);
      m_.nodes.push_back(d);
      return m_.x->dtype() == t_;
    }
    Node* mul = feeds(e->input(0), e, "Mul");
    return either_order(mul, [&](Value* a, Value* c) {
      if (!is_constant(c, kGeluSqrtHalf, t_) || a->dtype() != t_) return false;
      m_.x = a;
      m_.nodes.push_back(mul);
      return true;
    });
  }

  // sqrt(2/pi) * (x + 0.044715 * x^3), the products and the sum in either order.
  bool tanh_argument(Node* e) {
    m_.kind = GeluKind::kTanh;
    Node* scaled = feeds(e->input(0), e, "Mul");
    return either_order(scaled, [&](Value* inner, Value* beta) {
      if (!is_constant(beta, kGeluTanhBeta, t_)) return false;
      Node* sum = feeds(inner, scaled, "Add");
      return either_order(sum, [&](Value* x, Value* cubic) {
        if (x->dtype() != t_) return false;
        Node* times_kappa = feeds(cubic, sum, "Mul");
        return either_order(times_kappa, [&](Value* cube, Value* kappa) {
          if (!is_constant(kappa, kGeluTanhKappa, t_) || !is_cube(cube, times_kappa, x)) return false;
          m_.x = x;
          m_.nodes.insert(m_.nodes.end(), {times_kappa, sum, scaled});
          return true;
        });
      });
    });
  }

  // cube = Pow(x, 3) or x * (x * x) in any order, read only by `reader`; its nodes join the chain.
  bool is_cube(const Value* cube, const Node* reader, Value* x) {
    if (Node* pow = feeds(cube, reader, "Pow")) {
      if (pow->input(0) != x || !is_constant(pow->input(1), 3.0, pow->input(1) ? pow->input(1)->dtype() : t_)) return false;
      m_.nodes.push_back(pow);
      return true;
    }
    Node* mul = feeds(cube, reader, "Mul");
    return either_order(mul, [&](Value* a, Value* square) {
      Node* sq = feeds(square, mul, "Mul");
      if (a != x || !sq || sq->input(0) != x || sq->input(1) != x) return false;
      m_.nodes.insert(m_.nodes.end(), {sq, mul});
      return true;
    });
  }

  // 1 + e, then times x and 0.5 in one of three groupings: (x s) 0.5, x (s 0.5), (x 0.5) s.
  bool tail(Value* e) {
    Node* plus_one = sole_reader(e);
    if (!is_op(plus_one, "Add") || plus_one->output(0)->dtype() != t_) return false;
    const bool one = either_order(plus_one, [&](Value* a, Value* c) { return a == e && is_constant(c, 1.0, t_); });
    if (!one) return false;
    m_.nodes.push_back(plus_one);
    Value* s = plus_one->output(0);
    Node* r = sole_reader(s);
    if (!is_op(r, "Mul") || r->output(0)->dtype() != t_) return false;
    Value* other = r->input(0) == s ? r->input(1) : r->input(0);
    if (other == s) return false;
    if (other == m_.x || is_constant(other, 0.5, t_)) {  // (x s) 0.5 or x (s 0.5)
      const bool x_first = other == m_.x;
      Node* last = sole_reader(r->output(0));
      if (!is_op(last, "Mul") || last->output(0)->dtype() != t_) return false;
      const bool fits = either_order(last, [&](Value* a, Value* c) {
        return a == r->output(0) && (x_first ? is_constant(c, 0.5, t_) : c == m_.x);
      });
      if (!fits) return false;
      m_.nodes.insert(m_.nodes.end(), {r, last});
      return true;
    }
    Node* half_x = other->producer();  // (x 0.5) s
    if (!is_op(half_x, "Mul") || sole_reader(other) != r || other->dtype() != t_) return false;
    const bool fits =
        either_order(half_x, [&](Value* a, Value* c) { return a == m_.x && is_constant(c, 0.5, t_); });
    if (!fits) return false;
    m_.nodes.insert(m_.nodes.end(), {half_x, r});
    return true;
  }

  Match m_;
  DType t_ = DType::kUndefined;
};

// "/blocks.0/mlp/gelu/Mul_1" -> "/blocks.0/mlp/gelu/Gelu": the exporter's scope of the chain.
std::string gelu_node_name(const std::string& last) {
  const size_t slash = last.rfind('/');
  if (slash == std::string::npos) return last.empty() ? "Gelu" : last + "_gelu";
  return last.substr(0, slash + 1) + "Gelu";
}

}  // namespace

bool RecognizeGeluPass::run(Model& m) {
  register_amp_op_schemas();
  stats_.clear();
  Graph& g = *m.graph;
  std::unordered_set<Node*> removed;
  Matcher matcher;
  for (Node* e : g.node_vector()) {
    if (removed.count(e) || !(is_op(e, "Erf") || is_op(e, "Tanh"))) continue;
    std::optional<Match> match = matcher.at(e);
    if (!match) continue;
    Node* last = match->nodes.back();
    const std::string name = last->output(0)->name();
    Node* gelu = g.add_node("Gelu", {match->x}, {g.fresh_name(name + "_gelu")}, kAmpDomain, last);
    gelu->name = gelu_node_name(last->name);
    gelu->set_attr(Attribute::of_string("approximate", match->kind == GeluKind::kTanh ? "tanh" : "none"));
    replace_chain(g, match->nodes, gelu, match->x, removed);
    count(match->kind == GeluKind::kTanh ? "tanh GELUs recognised" : "exact GELUs recognised");
  }
  if (removed.empty()) return false;
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  return true;
}

}  // namespace amp
