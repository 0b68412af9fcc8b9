#include "passes/amp/insert_casts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/half.h"

namespace amp {

namespace {

float max_finite(DType t) { return t == DType::kFloat16 ? kFp16Max : bf16_to_fp32(0x7f7f); }

std::string type_suffix(DType t) {
  switch (t) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat: return "fp32";
    default: return std::string(dtype_name(t));
  }
}

// A graph input or node output: where a value is read and which type that read needs.
struct Requirement {
  Node* node;     // nullptr: graph output `output` of `graph`
  size_t input;
  Graph* graph;
  size_t output;
  DType want;
};

class CastInserter {
 public:
  CastInserter(Model& m, const AmpPolicy& policy, const AmpDecisions& d) : m_(m), policy_(policy), d_(d) {}

  CastReport run() {
    index_positions(*m_.graph);
    collect_requirements();
    retype_low_outputs();
    convert_free_values();
    for (const Requirement& r : requirements_)
      if (!r.node) satisfy_output(r);
    for (const Requirement& r : requirements_)
      if (r.node && r.node->input(r.input)->dtype() != r.want)
        r.node->set_input(r.input, cast_of(r.node->input(r.input), r.want));
    return std::move(report_);
  }

 private:
  // Casts go right after their value's producer; these positions are taken before any insertion.
  void index_positions(Graph& g) {
    Node* prev = nullptr;
    first_[&g] = nullptr;
    for (Node* n : g.nodes()) {
      node_names_.insert(n->name);
      if (prev)
        next_[prev] = n;
      else
        first_[&g] = n;
      prev = n;
      for (Graph* sub : n->subgraphs()) {
        graphs_.push_back(sub);
        index_positions(*sub);
      }
    }
    if (prev) next_[prev] = nullptr;
  }

  static bool floating_tensor(const Value* v) { return v && v->type().is_tensor() && is_floating(v->dtype()); }

  void require_input(Node* n, size_t i, DType t) {
    requirements_.push_back({n, i, nullptr, 0, t});
    want(n->input(i), t);
  }

  void want(Value* v, DType t) {
    auto [it, fresh] = wants_.try_emplace(v);
    if (fresh) wanted_.push_back(v);
    it->second.push_back(t);
  }

  void collect_requirements() {
    const DType target = policy_.target();
    for (const NodeDecision& nd : d_.nodes) {
      Node* n = const_cast<Node*>(nd.node);
      const bool low = nd.decision.precision == Precision::kLow && nd.decision.rule != Rule::kCast;
      for (size_t i = 0; i < n->inputs().size(); ++i) {
        const Value* v = n->input(i);
        if (!floating_tensor(v) || (i < nd.typing.flexible_inputs.size() && nd.typing.flexible_inputs[i])) continue;
        const bool data = std::find(nd.typing.data_inputs.begin(), nd.typing.data_inputs.end(), i) !=
                          nd.typing.data_inputs.end();
        const bool convertible = v->dtype() == DType::kFloat || v->dtype() == target;
        require_input(n, i, low && data && convertible ? target : v->dtype());
      }
    }
    // Graph outputs keep their types: the main graph's under keep_io_types, a body's always (its
    // If/Loop/Scan's types are fixed).
    auto outputs_of = [&](Graph* g) {
      for (size_t i = 0; i < g->outputs().size(); ++i) {
        Value* v = g->outputs()[i];
        if (!floating_tensor(v)) continue;
        requirements_.push_back({nullptr, 0, g, i, v->dtype()});
        want(v, v->dtype());
      }
    };
    if (policy_.keep_io_types) outputs_of(m_.graph.get());
    for (Graph* g : graphs_) outputs_of(g);
  }

  void retype_low_outputs() {
    for (const NodeDecision& nd : d_.nodes) {
      if (nd.decision.precision != Precision::kLow || nd.decision.rule == Rule::kCast) continue;
      for (size_t o : nd.typing.data_outputs) {
        Value* v = nd.node->output(o);
        if (v->dtype() != DType::kFloat) continue;
        v->set_dtype(policy_.target());
        ++report_.values_retyped;
      }
    }
  }

  // Free values wanted only in the low type are stored in it (see the header).
  void convert_free_values() {
    const DType target = policy_.target();
    for (Value* v : wanted_) {
      const std::vector<DType>& wants = wants_.at(v);
      if (v->dtype() != DType::kFloat) continue;
      const bool all_low = std::all_of(wants.begin(), wants.end(), [&](DType t) { return t == target; });
      const bool any_low = std::any_of(wants.begin(), wants.end(), [&](DType t) { return t == target; });
      Node* p = v->producer();
      if (!p && v->has_initializer() && !v->is_input()) {
        if (all_low && policy_.weights == WeightStorage::kLowPrecision) {
          ClampRecord rec{v->name()};
          v->graph()->set_initializer(v, convert_tensor(v->initializer(), target, &rec, policy_.min_magnitude));
          note_conversion(rec);
        } else if (any_low) {
          warn_if_out_of_range(v);
        }
      } else if (!p && v->is_input() && v->graph() == m_.graph.get() && !policy_.keep_io_types) {
        if (all_low) v->set_dtype(target);
      } else if (p && p->domain().empty() && p->op_type() == "Constant" && all_low) {
        convert_constant(p);
      } else if (p && p->domain().empty() && p->op_type() == "Cast" && all_low && p->input(0) &&
                 !is_floating(p->input(0)->dtype())) {
        p->set_attr(Attribute::of_int("to", static_cast<int64_t>(target)));
        v->set_dtype(target);
        ++report_.casts_retargeted;
      }
    }
  }

  void note_conversion(const ClampRecord& rec) {
    ++report_.constants_converted;
    if (rec.clamped || rec.flushed_to_zero || rec.raised) report_.clamps.push_back(rec);
  }

  void warn_if_out_of_range(const Value* v) {
    const Tensor& t = v->initializer();
    const float limit = max_finite(policy_.target());
    // On the bits, branch-free: finite magnitudes above the limit lie strictly between the limit's
    // bits and inf's. Every weight is read, so this loop is most of insert_casts' time on big models.
    const uint32_t* bits = t.as<uint32_t>();
    const uint32_t above = float_bits(limit), inf = 0x7f800000u;
    const int64_t n = t.numel();
    int64_t beyond = 0;
    for (int64_t k = 0; k < n; ++k) {
      const uint32_t a = bits[k] & 0x7fffffffu;
      beyond += static_cast<int64_t>((a > above) & (a < inf));
    }
    if (beyond)
      report_.warnings.push_back("fp32 initializer '" + v->name() + "' has " + std::to_string(beyond) +
                                 " values beyond the " + type_suffix(policy_.target()) +
                                 " range; its Cast at use turns them into inf (--weights lowp clamps them)");
  }

  void convert_constant(Node* c) {
    Value* out = c->output(0);
    Tensor value;
    if (const Attribute* a = c->attr("value"); a && a->kind == AttrKind::kTensor && a->t.dtype == DType::kFloat) {
      value = a->t;
    } else if (const Attribute* f = c->attr("value_float")) {
      value = Tensor(DType::kFloat, {});
      value.mutable_as<float>()[0] = f->f;
    } else if (const Attribute* fs = c->attr("value_floats")) {
      value = Tensor(DType::kFloat, {static_cast<int64_t>(fs->floats.size())});
      std::copy(fs->floats.begin(), fs->floats.end(), value.mutable_as<float>());
    } else {
      return;  // sparse_value: left in fp32, its consumers get a Cast
    }
    ClampRecord rec{out->name()};
    Tensor converted = convert_tensor(value, policy_.target(), &rec, policy_.min_magnitude);
    c->remove_attr("value_float");
    c->remove_attr("value_floats");
    c->set_attr(Attribute::of_tensor("value", std::move(converted)));
    out->set_dtype(policy_.target());
    note_conversion(rec);
  }

  // A graph output whose value changed type. The main graph's output keeps its name: the low value
  // is renamed and a Cast produces the original name. A body's outputs are positional.
  void satisfy_output(const Requirement& r) {
    Value* v = r.graph->outputs()[r.output];
    if (v->dtype() == r.want) return;
    if (r.graph != m_.graph.get()) {
      if (v->graph() == r.graph) {
        r.graph->set_output(r.output, cast_of(v, r.want));
      } else {  // an outer value returned by a body: cast inside the body
        Node* c = make_cast(*r.graph, v, r.want, r.graph->fresh_name(v->name() + "_" + type_suffix(r.want)), nullptr);
        r.graph->set_output(r.output, c->output(0));
      }
      return;
    }
    auto cached = casts_.find({v, r.want});
    if (cached != casts_.end()) {
      r.graph->set_output(r.output, cached->second);
      return;
    }
    Graph& g = *r.graph;
    if (!v->producer() || v->graph() != &g)
      throw Error("internal: graph output '" + v->name() + "' changed type but is not produced in its graph");
    const std::string name = v->name();
    g.rename_value(v, g.fresh_name(name + "_" + type_suffix(v->dtype())));
    if (std::find(g.value_info().begin(), g.value_info().end(), v) == g.value_info().end()) g.value_info().push_back(v);
    Node* c = make_cast(g, v, r.want, name, next_.at(v->producer()));
    g.set_output(r.output, c->output(0));
    casts_[{v, r.want}] = c->output(0);
  }

  // The one Cast of v to `to`: cached, an existing Cast of v in v's graph, or a new one.
  Value* cast_of(Value* v, DType to) {
    auto it = casts_.find({v, to});
    if (it != casts_.end()) return it->second;
    for (const Use& u : v->uses()) {
      Node* c = u.node;
      if (c->graph() == v->graph() && c->domain().empty() && c->op_type() == "Cast" && c->output(0) &&
          c->attr_int("to", 0) == static_cast<int64_t>(to))
        return casts_[{v, to}] = c->output(0);
    }
    Graph& g = *v->graph();
    Node* before = v->producer() ? next_.at(v->producer()) : first_.at(&g);
    Node* c = make_cast(g, v, to, g.fresh_name(v->name() + "_" + type_suffix(to)), before);
    return casts_[{v, to}] = c->output(0);
  }

  Node* make_cast(Graph& g, Value* v, DType to, const std::string& name, Node* before) {
    Node* c = g.add_node("Cast", {v}, {name}, "", before);
    // Named after its output, unless a node of the model already has that name (a graph output
    // that keeps its name is often its producer's name too, as in keras2onnx's exports): ONNX
    // Runtime refuses two nodes with one name.
    c->name = name;
    for (int k = 1; node_names_.count(c->name); ++k) c->name = name + "_cast" + (k == 1 ? "" : std::to_string(k));
    node_names_.insert(c->name);
    c->set_attr(Attribute::of_int("to", static_cast<int64_t>(to)));
    ValueType t = v->type();
    t.elem = to;
    c->output(0)->set_type(t);
    if (!c->output(0)->is_output()) g.value_info().push_back(c->output(0));
    ++report_.casts_added;
    return c;
  }

  Model& m_;
  const AmpPolicy& policy_;
  const AmpDecisions& d_;
  CastReport report_;
  std::vector<Graph*> graphs_;  // every subgraph
  std::unordered_map<const Node*, Node*> next_;
  std::unordered_map<const Graph*, Node*> first_;
  std::vector<Requirement> requirements_;
  std::unordered_map<Value*, std::vector<DType>> wants_;  // the types each read of a value needs
  std::vector<Value*> wanted_;                           // wants_'s keys in first-read order
  std::map<std::pair<Value*, DType>, Value*> casts_;
  std::unordered_set<std::string> node_names_;  // every node's, so a new Cast's is unique
};

}  // namespace

Tensor convert_tensor(const Tensor& t, DType target, ClampRecord* record, float min_magnitude) {
  if (t.dtype != DType::kFloat) throw Error("internal: convert_tensor of a " + std::string(dtype_name(t.dtype)) + " tensor");
  Tensor out(target, t.dims);
  out.name = t.name;
  out.doc_string = t.doc_string;
  const float limit = max_finite(target);
  const float* in = t.as<float>();
  uint16_t* bits = out.mutable_as<uint16_t>();
  for (int64_t k = 0; k < t.numel(); ++k) {
    float x = in[k];
    if (std::isfinite(x) && std::fabs(x) > limit) {
      ++record->clamped;
      record->max_error = std::max(record->max_error, static_cast<double>(std::fabs(x)) - limit);
      x = std::copysign(limit, x);
    }
    if (x != 0.0f && std::fabs(x) < min_magnitude) {
      ++record->raised;
      x = std::copysign(min_magnitude, x);
    }
    bits[k] = target == DType::kFloat16 ? fp32_to_fp16(x) : fp32_to_bf16(x);
    const bool zero = (bits[k] & 0x7fffu) == 0;
    record->flushed_to_zero += zero && x != 0.0f;
  }
  return out;
}

CastReport insert_casts(Model& m, const AmpPolicy& policy, const AmpDecisions& decisions) {
  return CastInserter(m, policy, decisions).run();
}

}  // namespace amp
