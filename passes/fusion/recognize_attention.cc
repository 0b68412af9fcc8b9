#include "passes/fusion/recognize_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/amp_ops.h"
#include "passes/fusion/chain_pattern.h"
#include "passes/fusion/replace_chain.h"

namespace amp {
namespace {

// The contents of a mask computed from constants alone, by the few ops exports build masks with
// (Unsqueeze, Cast, Trilu, Mul or Div by a scalar constant), or nothing.
struct Folded {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

std::optional<Folded> fold(const Value* v, int depth = 0);

// v is a one-element floating constant (any rank: a scalar or [1]), or a Cast of a constant to a
// floating type (PyTorch's training-mode export leaves baddbmm's factors so); its value.
std::optional<double> scalar_constant(const Value* v) {
  if (!v || !is_float(v->dtype())) return std::nullopt;
  const Tensor* c = constant_data(v);
  if (c) return c->numel() == 1 ? std::optional<double>(c->element(0)) : std::nullopt;
  const Node* p = v->producer();
  if (!is_op(p, "Cast") || !constant_data(p->input(0))) return std::nullopt;
  const std::optional<Folded> f = fold(v);
  return f && f->values.size() == 1 ? std::optional<double>(f->values[0]) : std::nullopt;
}

// v's rank: from its shape, or, where inference left it open (after a Slice to a computed length,
// say), from its producer — a Cast, Slice or Not keeps its input's rank, an Unsqueeze adds its
// constant axes — down to a constant.
std::optional<int64_t> rank_of(const Value* v, int depth = 0) {
  if (!v || depth > 8) return std::nullopt;
  if (v->type().shape) return static_cast<int64_t>(v->type().shape->rank());
  if (const Tensor* c = constant_data(v)) return static_cast<int64_t>(c->dims.size());
  const Node* p = v->producer();
  if (is_op(p, "Cast") || is_op(p, "Slice") || is_op(p, "Not")) return rank_of(p->input(0), depth + 1);
  if (is_op(p, "Unsqueeze") && p->inputs().size() == 2) {
    const Tensor* axes = constant_data(p->input(1));
    const std::optional<int64_t> r = rank_of(p->input(0), depth + 1);
    if (axes && r) return *r + axes->numel();
  }
  if (is_op(p, "Reshape") && p->inputs().size() == 2) {  // a key padding mask's [N * heads, 1, T]
    if (const Tensor* shape = constant_data(p->input(1))) return shape->numel();
    const std::optional<Shape>& of_shape = p->input(1)->type().shape;  // a computed shape of known length
    if (of_shape && of_shape->rank() == 1 && of_shape->dims[0].value) return *of_shape->dims[0].value;
  }
  if (is_op(p, "Mul") || is_op(p, "Add") || is_op(p, "Sub") || is_op(p, "Div") || is_op(p, "Where")) {
    int64_t r = 0;  // numpy broadcasting: the highest rank
    for (const Value* in : p->inputs()) {
      const std::optional<int64_t> ri = rank_of(in, depth + 1);
      if (!ri) return std::nullopt;
      r = std::max(r, *ri);
    }
    return r;
  }
  return std::nullopt;
}

// A mask larger than this is not folded: a causal mask of 2048 positions has 4M elements.
constexpr int64_t kMaxFolded = int64_t{1} << 22;

std::optional<Folded> fold(const Value* v, int depth) {
  if (!v || depth > 8) return std::nullopt;
  if (const Tensor* c = constant_data(v)) {
    if (c->numel() > kMaxFolded) return std::nullopt;
    Folded f{c->dims, std::vector<double>(static_cast<size_t>(c->numel()))};
    for (int64_t i = 0; i < c->numel(); ++i) f.values[static_cast<size_t>(i)] = c->element(i);
    return f;
  }
  const Node* p = v->producer();
  if (!p || !p->domain().empty() || p->outputs().size() != 1) return std::nullopt;
  const std::string& op = p->op_type();
  if (op == "Cast") {
    std::optional<Folded> f = fold(p->input(0), depth + 1);
    if (f && static_cast<DType>(p->attr_int("to", 0)) == DType::kBool)
      for (double& x : f->values) x = x != 0 ? 1 : 0;
    return f;
  }
  if (op == "Unsqueeze") {
    std::optional<Folded> f = fold(p->input(0), depth + 1);
    std::vector<int64_t> axes = p->attr_ints("axes");
    if (p->inputs().size() > 1) {
      const Tensor* a = constant_data(p->input(1));
      if (!a) return std::nullopt;
      for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(static_cast<int64_t>(a->element(i)));
    }
    if (!f) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(f->dims.size() + axes.size());
    for (int64_t& a : axes) a = a < 0 ? a + rank : a;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) {
      if (a < 0 || a > static_cast<int64_t>(f->dims.size())) return std::nullopt;
      f->dims.insert(f->dims.begin() + a, 1);
    }
    return f;
  }
  if (op == "Mul" || op == "Div") {
    for (int side = 0; side < 2; ++side) {
      if (op == "Div" && side == 0) continue;  // c / x is no scaling of x
      const std::optional<double> c = scalar_constant(p->input(static_cast<size_t>(side)));
      if (!c) continue;
      std::optional<Folded> f = fold(p->input(static_cast<size_t>(1 - side)), depth + 1);
      if (!f) return std::nullopt;
      for (double& x : f->values) x = op == "Mul" ? x * *c : x / *c;
      return f;
    }
    return std::nullopt;
  }
  if (op == "Trilu") {
    std::optional<Folded> f = fold(p->input(0), depth + 1);
    int64_t k = 0;
    if (p->inputs().size() > 1 && p->input(1)) {
      const Tensor* kt = constant_data(p->input(1));
      if (!kt || kt->numel() != 1) return std::nullopt;
      k = static_cast<int64_t>(kt->element(0));
    }
    if (!f || f->dims.size() < 2) return std::nullopt;
    const bool upper = p->attr_int("upper", 1) != 0;
    const int64_t rows = f->dims[f->dims.size() - 2], cols = f->dims.back();
    for (size_t at = 0; at < f->values.size(); ++at) {
      const int64_t j = static_cast<int64_t>(at) % cols, i = (static_cast<int64_t>(at) / cols) % rows;
      if (upper ? j - i < k : j - i > k) f->values[at] = 0;
    }
    return f;
  }
  return std::nullopt;
}

// f, its leading 1s dropped, is [n, n] with n > 1 and holds `hidden` where key j > query i and
// `shown` elsewhere: a causal mask of the scores' own length (a mask of n > 1 rows broadcasts
// against the scores only when they have n rows).
bool causal_pattern(const Folded& f, double hidden, double shown) {
  size_t lead = 0;
  while (lead + 2 < f.dims.size() && f.dims[lead] == 1) ++lead;
  if (f.dims.size() - lead != 2) return false;
  const int64_t n = f.dims[lead];
  if (n < 2 || f.dims[lead + 1] != n) return false;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (f.values[static_cast<size_t>(i * n + j)] != (j > i ? hidden : shown)) return false;
  return true;
}

// hide (true where a key is hidden) is a triu(1) buffer sliced from the top-left corner, as
// models register `torch.ones(ctx, ctx).triu(1)` and slice it [:T, :T]: Slices whose starts are
// 0 and steps 1 over the buffer's two axes, through Casts to bool.
bool sliced_causal_buffer(const Value* hide) {
  const Value* v = hide;
  for (int depth = 0; depth < 8; ++depth) {
    const Node* p = v->producer();
    if (constant_data(v)) {
      const std::optional<Folded> f = fold(v);
      return f && causal_pattern(*f, 1, 0);
    }
    if (is_op(p, "Cast") && p->input(0)->dtype() == DType::kBool) {
      v = p->input(0);
      continue;
    }
    if (!is_op(p, "Slice") || p->inputs().size() < 3) return false;
    for (size_t k : {size_t{1}, size_t{4}}) {  // starts all 0; steps, when given, all 1
      if (k >= p->inputs().size() || !p->input(k)) continue;
      const Tensor* t = constant_data(p->input(k));
      if (!t) return false;
      for (int64_t i = 0; i < t->numel(); ++i)
        if (t->element(i) != (k == 1 ? 0 : 1)) return false;
    }
    if (p->inputs().size() > 3 && p->input(3) && !constant_data(p->input(3))) return false;
    v = p->input(0);
  }
  return false;
}

// Removes the nodes that computed v, now that nothing reads it, and theirs in turn.
void remove_unread(Graph& g, Value* v, std::unordered_set<Node*>& removed) {
  if (!v || !v->uses().empty() || v->is_output()) return;
  Node* p = v->producer();
  if (!p || removed.count(p) || !p->subgraphs().empty()) return;
  for (const Value* out : p->outputs())
    if (out && (!out->uses().empty() || out->is_output())) return;
  const std::vector<Value*> inputs = p->inputs();
  g.remove_node(p);
  removed.insert(p);
  for (Value* in : inputs) remove_unread(g, in, removed);
}

struct Match {
  Value* q = nullptr;
  Value* k = nullptr;             // K itself [..., Tk, d], or the source the Transpose below permutes
  std::vector<int64_t> k_perm;    // empty: k is K; else a Transpose of k by this perm is K
  Value* v = nullptr;
  Value* mask = nullptr;          // the float mask to add, or the bool mask that hides (mask_hides)
  bool mask_hides = false;
  bool causal = false;
  Value* dropped_mask = nullptr;  // a mask is_causal replaces: its computation goes when unread
  double scale = 1;
  int64_t rank = -1;
  DType type = DType::kUndefined;
  std::vector<Node*> nodes;       // the chain; the last computes Y
};

class Matcher {
 public:
  explicit Matcher(int64_t opset) : opset_(opset) {}

  std::optional<Match> at(Node* softmax) {
    m_ = Match{};
    masked_scores_ = nullptr;
    Value* logits = softmax->input(0);
    m_.type = logits ? logits->dtype() : DType::kUndefined;
    if (!is_float(m_.type)) return std::nullopt;
    const int64_t axis = softmax->attr_int("axis", opset_ < 13 ? 1 : -1);
    nodes_ = {softmax};
    // Softmax -> [Dropout as the identity] -> MatMul(P, V).
    Value* p = softmax->output(0);
    Node* reader = sole_reader(p);
    if (is_op_any(reader, "Dropout")) {
      if (!identity_dropout(reader)) return std::nullopt;
      nodes_.push_back(reader);
      p = reader->output(0);
      reader = sole_reader(p);
    }
    if (!is_op(reader, "MatMul") || reader->input(0) != p || !typed(reader->output(0))) return std::nullopt;
    Node* pv = reader;
    m_.v = pv->input(1);
    // Up from the logits to the product of Q and K^T.
    Value* cur = logits;
    Node* consumer = softmax;
    int masks = 0;
    bool scale_after_mask = false;     // a scale between the mask and the Softmax
    bool positive_after_mask = true;   // every such scale > 0
    for (;;) {
      Node* n = cur->producer();
      if (!n || sole_reader(cur) != consumer || !typed(cur)) return std::nullopt;
      if (is_op(n, "MatMul")) break;
      nodes_.push_back(n);
      consumer = n;
      double factor = 1;
      if (Value* rest = peel_scale(n, factor)) {
        if (masks == 0) {
          scale_after_mask = true;
          positive_after_mask = positive_after_mask && factor > 0;
        }
        cur = rest;
        continue;
      }
      if (masks++ > 0) return std::nullopt;
      if (is_op(n, "Where") && n->inputs().size() == 3) {
        const std::optional<double> fill = scalar_constant(n->input(1));
        if (!fill || !(std::isinf(*fill) && *fill < 0) || n->input(1)->dtype() != m_.type) return std::nullopt;
        m_.mask = n->input(0);
        m_.mask_hides = true;
        masked_scores_ = n->output(0);
        cur = n->input(2);
        continue;
      }
      if (is_op(n, "Add") && n->inputs().size() == 2) {
        if (scale_after_mask) return std::nullopt;  // s (x + mask) would need a scaled mask
        const bool first = reaches_scores(n->input(0)), second = reaches_scores(n->input(1));
        if (first == second) return std::nullopt;
        cur = n->input(first ? 0 : 1);
        m_.mask = n->input(first ? 1 : 0);
        masked_scores_ = n->output(0);
        continue;
      }
      return std::nullopt;
    }
    Node* qk = cur->producer();
    nodes_.push_back(qk);
    // Q side: scales.
    Value* q = qk->input(0);
    for (Node* c = qk; Value* rest = peel_input_scale(q, c);) {
      c = q->producer();
      nodes_.push_back(c);
      q = rest;
    }
    // K side: scales, a Transpose, scales.
    Value* kt = qk->input(1);
    Node* c = qk;
    for (Value* rest; (rest = peel_input_scale(kt, c));) {
      c = kt->producer();
      nodes_.push_back(c);
      kt = rest;
    }
    std::vector<int64_t> perm;
    Node* t = kt->producer();
    if (is_op(t, "Transpose") && sole_reader(kt) == c && typed(kt)) {
      perm = t->attr_ints("perm");
      if (perm.size() < 2) return std::nullopt;
      nodes_.push_back(t);
      c = t;
      kt = t->input(0);
      for (Value* rest; (rest = peel_input_scale(kt, c));) {
        c = kt->producer();
        nodes_.push_back(c);
        kt = rest;
      }
    }
    // One rank for everything known.
    int64_t r = perm.empty() ? -1 : static_cast<int64_t>(perm.size());
    for (const Value* v : {q, kt, m_.v, logits}) {
      const std::optional<int64_t> vr = rank_of(v);
      if (!vr) continue;
      if (r >= 0 && *vr != r) return std::nullopt;
      r = *vr;
    }
    if (r < 2 || !(axis == -1 || axis == r - 1)) return std::nullopt;
    for (const Value* v : {q, kt, m_.v})
      if (v->dtype() != m_.type) return std::nullopt;
    if (perm.empty()) {  // K^T as it is: transposing its last two axes gives K
      perm.resize(static_cast<size_t>(r));
      for (int64_t i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
    }
    std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    m_.q = q;
    m_.k = kt;
    if (!identity) m_.k_perm = perm;
    m_.rank = r;
    if (m_.mask && !mask_fits()) return std::nullopt;
    // s where(hide, -inf, x) = where(hide, -inf, s x) only for s > 0.
    if (m_.mask && scale_after_mask && (!m_.mask_hides || !positive_after_mask)) return std::nullopt;
    nodes_.push_back(pv);
    m_.nodes = nodes_;
    return m_;
  }

 private:
  static bool is_op_any(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }
  bool typed(const Value* v) const { return v && v->dtype() == m_.type; }

  // Dropout whose output 0 is its input: no training_mode, or a constant false one, or a
  // constant ratio of 0; its mask, if any, unread.
  bool identity_dropout(const Node* d) const {
    if (d->outputs().size() > 1 && d->output(1) && (!d->output(1)->uses().empty() || d->output(1)->is_output()))
      return false;
    if (opset_ < 12 || d->inputs().size() < 3 || !d->input(2)) return true;
    const Tensor* training = constant_data(d->input(2));
    if (training && training->numel() == 1 && training->element(0) == 0) return true;
    const std::optional<double> ratio = d->inputs().size() > 1 && d->input(1) ? scalar_constant(d->input(1))
                                                                               : std::optional<double>(0.5);
    return ratio && *ratio == 0;
  }

  // n is Mul or Div of the chain by a scalar constant of rank <= 2 (a higher one could broadcast
  // the scores): folds it into the scale, returns the chain's operand and sets `factor`.
  Value* peel_scale(Node* n, double& factor) {
    const bool mul = is_op(n, "Mul"), div = is_op(n, "Div");
    if (!(mul || div) || n->inputs().size() != 2) return nullptr;
    for (int side = 0; side < 2; ++side) {
      if (div && side == 0) continue;
      const Value* constant = n->input(static_cast<size_t>(side));
      const std::optional<double> c = scalar_constant(constant);
      Value* rest = n->input(static_cast<size_t>(1 - side));
      const std::optional<int64_t> constant_rank = rank_of(constant);
      if (!c || !std::isfinite(*c) || (div && *c == 0) || !typed(rest) || !constant_rank || *constant_rank > 2)
        continue;
      factor = mul ? *c : 1 / *c;
      m_.scale *= factor;
      return rest;
    }
    return nullptr;
  }

  // The input v of `consumer` is a Mul or Div by a scalar constant read by `consumer` alone:
  // folds it, returns its other operand.
  Value* peel_input_scale(Value* v, Node* consumer) {
    Node* n = v->producer();
    if (!n || sole_reader(v) != consumer || !typed(v)) return nullptr;
    double factor = 1;
    return peel_scale(n, factor);
  }

  // v is the scores' side of an Add: a chain of scalar Mul/Div read once, down to a MatMul.
  bool reaches_scores(const Value* v) const {
    for (int depth = 0; depth < 8 && v; ++depth) {
      const Node* n = v->producer();
      if (!n || v->uses().size() != 1 || v->is_output()) return false;
      if (is_op(n, "MatMul")) return true;
      if (!(is_op(n, "Mul") || is_op(n, "Div")) || n->inputs().size() != 2) return false;
      const int side = scalar_constant(n->input(1)) ? 0 : (is_op(n, "Mul") && scalar_constant(n->input(0))) ? 1 : -1;
      if (side < 0) return false;
      v = n->input(static_cast<size_t>(side));
    }
    return false;
  }

  // The mask's rank, or that of the masked scores, is known: the mask does not raise the
  // scores' rank; a bool one hides, a float one is of the chain's type. Sets causal where the
  // mask is the causal pattern.
  bool mask_fits() {
    const std::optional<int64_t> r = rank_of(m_.mask), masked = rank_of(masked_scores_);
    if (r ? *r > m_.rank : masked != m_.rank) return false;
    if (m_.mask_hides) {
      if (m_.mask->dtype() != DType::kBool) return false;
      if (sliced_causal_buffer(m_.mask)) m_.causal = true;
    } else {
      if (m_.mask->dtype() != m_.type) return false;
      const std::optional<Folded> f = fold(m_.mask);
      if (f && causal_pattern(*f, -std::numeric_limits<double>::infinity(), 0)) m_.causal = true;
    }
    if (m_.causal) {
      m_.dropped_mask = m_.mask;
      m_.mask = nullptr;
    }
    return true;
  }

  int64_t opset_;
  Match m_;
  std::vector<Node*> nodes_;
  const Value* masked_scores_ = nullptr;  // the mask op's output
};

// "/blocks.0/attn/MatMul_1" -> "/blocks.0/attn/Attention": the exporter's scope of the chain.
std::string attention_node_name(const std::string& last) {
  const size_t slash = last.rfind('/');
  if (slash == std::string::npos) return last.empty() ? "Attention" : last + "_attention";
  return last.substr(0, slash + 1) + "Attention";
}

}  // namespace

AttentionChains count_attention_chains(const Model& m) {
  AttentionChains c;
  Matcher matcher(m.opset_version(""));
  for (Node* n : m.graph->node_vector()) {  // the matcher reads the graph and changes nothing
    if (!is_op(n, "Softmax")) continue;
    if (std::optional<Match> match = matcher.at(n)) {
      ++c.total;
      c.causal += match->causal;
      c.masked += match->mask != nullptr;
    }
  }
  return c;
}

bool RecognizeAttentionPass::run(Model& m) {
  register_amp_op_schemas();
  stats_.clear();
  Graph& g = *m.graph;
  std::unordered_set<Node*> removed;
  std::unordered_set<std::string> names;  // node names stay unique: reports and --explain use them
  for (const Node* n : g.nodes()) names.insert(n->name);
  Matcher matcher(m.opset_version(""));
  for (Node* softmax : g.node_vector()) {
    if (removed.count(softmax) || !is_op(softmax, "Softmax")) continue;
    std::optional<Match> match = matcher.at(softmax);
    if (!match) continue;
    // The chain in graph order, for replace_chain.
    std::unordered_map<const Node*, size_t> position;
    for (const Node* n : g.nodes()) position.emplace(n, position.size());
    std::sort(match->nodes.begin(), match->nodes.end(),
              [&](const Node* a, const Node* b) { return position.at(a) < position.at(b); });
    Node* last = match->nodes.back();
    Value* y = last->output(0);
    const std::string name = y->name();
    const bool y_shaped = y->type().shape.has_value();
    const Shape unknown_rank{std::vector<Dim>(static_cast<size_t>(match->rank))};
    Value* k = match->k;
    if (!match->k_perm.empty()) {
      Node* t = g.add_node("Transpose", {k}, {g.fresh_name(name + "_keys")}, "", last);
      t->name = g.fresh_name(last->name + "_keys");
      t->set_attr(Attribute::of_ints("perm", match->k_perm));
      std::optional<Shape> shape = unknown_rank;
      if (k->type().shape && k->type().shape->rank() == match->k_perm.size()) {
        for (size_t i = 0; i < match->k_perm.size(); ++i)
          shape->dims[i] = k->type().shape->dims[static_cast<size_t>(match->k_perm[i])];
      }
      t->output(0)->set_type(ValueType::tensor(match->type, shape));
      k = t->output(0);
    }
    Value* mask = match->mask;
    if (mask && match->mask_hides) {  // Attention's bool mask says where keys take part
      Node* attend = g.add_node("Not", {mask}, {g.fresh_name(mask->name() + "_attend")}, "", last);
      attend->name = g.fresh_name(last->name + "_attend");
      attend->output(0)->set_type(ValueType::tensor(DType::kBool, mask->type().shape));
      mask = attend->output(0);
    }
    std::vector<Value*> inputs = {match->q, k, match->v};
    if (mask) inputs.push_back(mask);
    Node* attention =
        g.add_node("Attention", inputs, {g.fresh_name(name + "_attention"), g.fresh_name(name + "_lse")}, kAmpDomain, last);
    std::string node_name = attention_node_name(last->name);
    for (int i = 1; names.count(node_name); ++i) node_name = attention_node_name(last->name) + "_" + std::to_string(i);
    attention->name = node_name;
    names.insert(node_name);
    attention->set_attr(Attribute::of_float("scale", static_cast<float>(match->scale)));
    attention->set_attr(Attribute::of_int("is_causal", match->causal ? 1 : 0));
    std::optional<Shape> rows;
    if (match->q->type().shape) {
      rows = match->q->type().shape;
      rows->dims.pop_back();
    }
    attention->output(1)->set_type(
        ValueType::tensor(match->type == DType::kDouble ? DType::kDouble : DType::kFloat, rows));
    replace_chain(g, match->nodes, attention, match->q, removed);
    if (!y_shaped) attention->output(0)->set_type(ValueType::tensor(match->type, unknown_rank));
    remove_unread(g, match->dropped_mask, removed);
    count("attentions recognised");
    if (match->causal) count("causal");
    else if (match->mask) count("masked");
  }
  if (removed.empty()) return false;
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  return true;
}

}  // namespace amp
