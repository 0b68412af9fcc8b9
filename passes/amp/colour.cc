#include "passes/amp/colour.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <deque>

namespace amp {

std::string precision_name(Precision p, DType target) {
  switch (p) {
    case Precision::kLow: return target == DType::kBFloat16 ? "bf16" : "fp16";
    case Precision::kFp32: return "fp32";
    case Precision::kNone: break;
  }
  return "-";
}

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::kAllowList: return "allow-list";
    case Rule::kDenyList: return "deny-list";
    case Rule::kDenyPath: return "deny-path";
    case Rule::kBetweenLow: return "between-low";
    case Rule::kNextToLow: return "next-to-low";
    case Rule::kNextToFp32: return "next-to-fp32";
    case Rule::kInputsLow: return "inputs-low";
    case Rule::kInputFp32: return "input-fp32";
    case Rule::kNotListed: return "not-listed";
    case Rule::kBlocked: return "blocked";
    case Rule::kCalibration: return "calibration";
    case Rule::kSchemaForbids: return "schema-forbids";
    case Rule::kTypeFromAttribute: return "type-from-attribute";
    case Rule::kOtherType: return "other-type";
    case Rule::kControlFlow: return "control-flow";
    case Rule::kQuantized: return "quantized";
    case Rule::kOrtFusion: return "onnxruntime-fusion";
    case Rule::kNoSchema: return "no-schema";
    case Rule::kNoFloatData: return "no-float-data";
    case Rule::kCast: return "cast";
    case Rule::kConstant: return "constant";
  }
  return "?";
}

std::string node_ref(const Node* n) {
  if (!n->name.empty()) return n->name + " (" + n->op_type() + ")";
  for (const Value* v : n->outputs())
    if (v) return n->op_type() + " -> " + v->name();
  return n->label();
}

const NodeDecision* AmpDecisions::find(const Node* n) const {
  auto it = index.find(n);
  return it == index.end() ? nullptr : &nodes[it->second];
}

const NodeDecision* AmpDecisions::find(const std::string& name_or_ref) const {
  for (const auto& nd : nodes)
    if ((!nd.name.empty() && nd.name == name_or_ref) || nd.ref == name_or_ref) return &nd;
  return nullptr;
}

namespace {

constexpr int kNone = -1;

bool is_quantize_op(const Node* n) {
  return n->domain().empty() && (n->op_type() == "QuantizeLinear" || n->op_type() == "DequantizeLinear");
}

// A node of a quantized region (a QDQ model, as ONNX Runtime's quantization tools write them): a
// QuantizeLinear or DequantizeLinear, or an op that reads a DequantizeLinear's output or feeds a
// QuantizeLinear. ONNX Runtime runs DequantizeLinear -> op -> QuantizeLinear as one integer
// kernel; a Cast in between would break that pattern, and the values there carry 8 bits anyway.
bool in_quantized_region(const Node* n) {
  if (is_quantize_op(n)) return true;
  for (const Value* v : n->inputs())
    if (v && v->producer() && v->producer()->domain().empty() && v->producer()->op_type() == "DequantizeLinear")
      return true;
  for (const Value* v : n->outputs())
    if (v)
      for (const Use& u : v->uses())
        if (u.node->domain().empty() && u.node->op_type() == "QuantizeLinear") return true;
  return false;
}

// A BatchNormalization that reads a MatMul's output, directly or through a Reshape: ONNX Runtime's
// MatMul + BatchNormalization fusion (on by default) folds the pair into a Gemm built in one element
// type, and with fp16 data and fp32 parameters (valid ONNX: BatchNormalization-15 types them apart)
// the session fails to initialise ("Tensor type mismatch"). The normalisation stays fp32 instead,
// behind a Cast that the fusion does not look through: the same values, and a model it loads.
bool batch_norm_after_matmul(const Node* n) {
  if (!n->domain().empty() || n->op_type() != "BatchNormalization" || n->inputs().empty() || !n->input(0)) return false;
  const Node* p = n->input(0)->producer();
  if (p && p->domain().empty() && p->op_type() == "Reshape" && p->input(0)) p = p->input(0)->producer();
  return p && p->domain().empty() && p->op_type() == "MatMul";
}

bool is_control_flow(const Node* n) {
  return n->domain().empty() && (n->op_type() == "If" || n->op_type() == "Loop" || n->op_type() == "Scan");
}

void collect(const Graph& g, std::vector<const Node*>& out) {
  for (const Node* n : g.nodes()) {
    out.push_back(n);
    for (const Graph* sub : n->subgraphs()) collect(*sub, out);
  }
}

class Colouring {
 public:
  Colouring(const Model& m, const AmpPolicy& policy, AmpDecisions& d)
      : m_(m), policy_(policy), d_(d), typer_(policy.target(), policy.beyond_opset_schemas) {}

  void run() {
    std::vector<const Node*> order;
    collect(*m_.graph, order);
    d_.target = policy_.target();
    d_.nodes.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      NodeDecision& nd = d_.nodes[i];
      nd.node = order[i];
      nd.name = order[i]->name;
      nd.ref = node_ref(order[i]);
      nd.op = order[i]->op_type();
      d_.index[order[i]] = i;
    }
    n_ = static_cast<int>(order.size());
    category_.assign(n_, kNone);
    decided_.assign(n_, false);
    for (int i = 0; i < n_; ++i) classify(i);
    build_edges();  // step 1, allow-list ops, happened in classify()
    deny_paths();
    between_low();
    spread_through_clear();
    follow_inputs();
    if (policy_.cast_placement == CastPlacement::kCompute) {
      fp32_clear_edges();
      fp32_low_values_read_in_fp32();
    }
  }

 private:
  const Node* node(int i) const { return d_.nodes[i].node; }
  const std::string& ref(int i) const { return d_.nodes[i].ref; }
  Decision& decision(int i) { return d_.nodes[i].decision; }
  int index_of(const Node* n) const {
    auto it = d_.index.find(n);
    return it == d_.index.end() ? kNone : static_cast<int>(it->second);
  }

  void decide(int i, Precision p, Rule r, std::string reason, int from = kNone) {
    decision(i) = Decision{p, r, std::move(reason), from == kNone ? std::string() : ref(from), {}};
    decided_[i] = true;
  }

  // An undecided clear/infer op that may run low: what steps 2-5 move.
  bool open(int i, int cat = kNone) const {
    return !decided_[i] && category_[i] != kNone && (cat == kNone || category_[i] == cat);
  }
  bool decided_by(int i, Rule r) const { return decided_[i] && d_.nodes[i].decision.rule == r; }
  bool low(int i) const { return decided_[i] && d_.nodes[i].decision.precision == Precision::kLow; }

  void classify(int i) {
    const Node* n = node(i);
    NodeDecision& nd = d_.nodes[i];
    const std::string target = std::string(dtype_name(policy_.target()));
    if (n->domain().empty() && n->op_type() == "Cast") {
      decision(i) = cast_decision(*n);
      decided_[i] = true;
      return;
    }
    if (n->domain().empty() && n->op_type() == "Constant")
      return decide(i, Precision::kNone, Rule::kConstant, "constant: stored in the type its consumers need");
    if (is_quantize_op(n))
      return decide(i, Precision::kFp32, Rule::kQuantized, "quantization: the edge of a quantized (QDQ) region, kept as it is");
    if (is_control_flow(n))
      return decide(i, Precision::kFp32, Rule::kControlFlow,
                    "control flow: inputs, outputs and loop-carried values keep their types; the body is "
                    "coloured on its own");
    const onnx::OpSchema* schema = node_schema(*n, m_.opset_imports);
    if (!schema)
      return decide(i, Precision::kFp32, Rule::kNoSchema,
                    "no ONNX schema for " + (n->domain().empty() ? "" : n->domain() + ":") + n->op_type() +
                        " at the model's opset: types kept");
    nd.typing = typer_(*n, schema);
    const NodeTyping& t = nd.typing;
    if (t.kind != NodeTyping::Kind::kData)
      return decide(i, Precision::kNone, Rule::kNoFloatData, "moves no floating data: reads any precision");
    if (const std::string* pattern = policy_.blocked_by(*n))
      return decide(i, Precision::kFp32, Rule::kBlocked, "blocked by node pattern '" + *pattern + "'");
    if (const CalibratedNode* c = policy_.calibrated(*n)) {
      decide(i, Precision::kFp32, Rule::kCalibration, c->reason);
      decision(i).measurements = c->measurements;
      return;
    }
    if (in_quantized_region(n))
      return decide(i, Precision::kFp32, Rule::kQuantized,
                    "in a quantized (QDQ) region: between DequantizeLinear and QuantizeLinear, which ONNX Runtime runs "
                    "as one integer kernel; kept fp32");
    if (batch_norm_after_matmul(n))
      return decide(i, Precision::kFp32, Rule::kOrtFusion,
                    "BatchNormalization after a MatMul: ONNX Runtime folds the pair into one Gemm assuming one element "
                    "type, which fp16 data with fp32 parameters breaks; kept fp32 behind a Cast, which it does not fold");
    const OpListEntry* entry = policy_.entry(n->domain(), n->op_type());
    if (!entry)
      return decide(i, Precision::kFp32, Rule::kNotListed, n->op_type() + " is on no op list; unlisted ops stay fp32");
    if (entry->category == OpCategory::kDeny)
      return decide(i, Precision::kFp32, Rule::kDenyList, n->op_type() + " is on the deny list: " + entry->reason);
    if (t.data_type != DType::kFloat && t.data_type != policy_.target())
      return decide(i, Precision::kFp32, Rule::kOtherType,
                    "its data is " + std::string(dtype_name(t.data_type)) + "; only float data is converted");
    if (t.type_from_attribute)
      return decide(i, Precision::kFp32, Rule::kTypeFromAttribute, "its output type is set by an attribute");
    if (!t.allows_target)
      return decide(i, Precision::kFp32, Rule::kSchemaForbids,
                    n->op_type() + "-" + std::to_string(schema->SinceVersion()) + "'s type constraint " + t.type_var +
                        " does not allow " + target);
    category_[i] = static_cast<int>(entry->category);
    if (entry->category == OpCategory::kAllow)
      decide(i, Precision::kLow, Rule::kAllowList, n->op_type() + " is on the allow list: " + entry->reason);
  }

  // Edges along the floating data: producer -> consumer where both bind the value to their data
  // type variable. Sorted by position so that results do not depend on use-list order.
  void build_edges() {
    fanin_.assign(n_, {});
    fanout_.assign(n_, {});
    for (int i = 0; i < n_; ++i) {
      const NodeTyping& t = d_.nodes[i].typing;
      for (size_t in : t.data_inputs) {
        const Value* v = node(i)->input(in);
        if (!v->producer()) continue;
        const int p = index_of(v->producer());
        if (p == kNone) continue;
        const auto& pouts = d_.nodes[p].typing.data_outputs;
        if (std::find(pouts.begin(), pouts.end(), v->output_index()) == pouts.end()) continue;
        fanin_[i].push_back(p);
        fanout_[p].push_back(i);
      }
    }
    for (auto* lists : {&fanin_, &fanout_})
      for (auto& l : *lists) {
        std::sort(l.begin(), l.end());
        l.erase(std::unique(l.begin(), l.end()), l.end());
      }
  }

  // Step 2: fp32 forward from deny ops, onto nodes on a path that ends at an infer or deny op.
  void deny_paths() {
    std::vector<int> via(n_, kNone);
    for (int i = 0; i < n_; ++i) {
      if (!open(i)) continue;
      for (int p : fanin_[i])
        if (decided_by(p, Rule::kDenyList) || via[p] != kNone) {
          via[i] = p;
          break;
        }
    }
    std::vector<bool> reaches_end(n_, false);
    for (int i = n_ - 1; i >= 0; --i) {
      if (via[i] == kNone) continue;
      bool end = category_[i] == static_cast<int>(OpCategory::kInfer);
      for (int c : fanout_[i]) end = end || decided_by(c, Rule::kDenyList) || (via[c] != kNone && reaches_end[c]);
      reaches_end[i] = end;
    }
    for (int i = 0; i < n_; ++i)
      if (reaches_end[i])
        decide(i, Precision::kFp32, Rule::kDenyPath,
               "on an fp32 path from a deny-list op to an fp32 op, reached from " + ref(via[i]), via[i]);
  }

  // Step 3: clear/infer ops on a path from an allow-list op to another become low.
  void between_low() {
    std::vector<int> via(n_, kNone);
    for (int i = 0; i < n_; ++i) {
      if (!open(i)) continue;
      for (int p : fanin_[i])
        if (decided_by(p, Rule::kAllowList) || via[p] != kNone) {
          via[i] = p;
          break;
        }
    }
    std::vector<bool> to_low(n_, false);
    for (int i = n_ - 1; i >= 0; --i) {
      if (via[i] == kNone) continue;
      for (int c : fanout_[i]) to_low[i] = to_low[i] || decided_by(c, Rule::kAllowList) || (via[c] != kNone && to_low[c]);
    }
    for (int i = 0; i < n_; ++i)
      if (to_low[i])
        decide(i, Precision::kLow, Rule::kBetweenLow, "between low-precision ops, reached from " + ref(via[i]), via[i]);
  }

  // Step 4: low spreads through clear ops in both directions.
  void spread_through_clear() {
    std::deque<int> queue;
    for (int i = 0; i < n_; ++i)
      if (low(i) && d_.nodes[i].decision.rule != Rule::kCast) queue.push_back(i);
    const int clear = static_cast<int>(OpCategory::kClear);
    while (!queue.empty()) {
      const int x = queue.front();
      queue.pop_front();
      for (const auto* list : {&fanin_[x], &fanout_[x]})
        for (int nb : *list)
          if (open(nb, clear)) {
            decide(nb, Precision::kLow, Rule::kNextToLow, "data movement next to low-precision " + ref(x), x);
            queue.push_back(nb);
          }
    }
  }

  enum class Source { kFree, kLow, kFp32 };

  // What a value is before the rewrite chooses for it: produced in a fixed precision, or free to
  // take whatever type its consumers need (constants, initializers, casts from non-float types).
  // Casts between float types are looked through, to the value they convert: then the Casts a
  // rewrite inserted do not change the answer when the rewritten model is coloured again.
  Source source_of(const Value*& v, int* producer) const {
    while (v->producer() && v->producer()->domain().empty() && v->producer()->op_type() == "Cast" &&
           v->producer()->input(0) && is_floating(v->producer()->input(0)->dtype()))
      v = v->producer()->input(0);
    *producer = kNone;
    const auto by_type = [&] { return v->dtype() == policy_.target() ? Source::kLow : Source::kFp32; };
    if (!v->producer()) {
      if (v->has_initializer() && !v->is_input()) return Source::kFree;
      if (v->is_input() && v->graph() == m_.graph.get() && !policy_.keep_io_types) return Source::kFree;
      return by_type();
    }
    const int p = index_of(v->producer());
    *producer = p;
    const Decision& pd = d_.nodes[p].decision;
    if (pd.rule == Rule::kConstant || pd.rule == Rule::kCast) return Source::kFree;  // Cast from a non-float type
    if (pd.precision == Precision::kLow) return Source::kLow;
    if (pd.precision == Precision::kFp32) return Source::kFp32;
    return by_type();
  }

  // Step 5's rule for node i: fp32 when an input is fp32 (named, with its producer), else low when
  // one is low, else fp32 (only constants).
  void decide_by_inputs(int i) {
    int first_low = kNone, first_fp32 = kNone;
    bool low_input = false, fp32_input = false;
    std::string fp32_name;
    for (size_t in : d_.nodes[i].typing.data_inputs) {
      const Value* v = node(i)->input(in);
      int p;
      const Source s = source_of(v, &p);  // v becomes the value behind any float Casts
      if (s == Source::kLow && !low_input) {
        low_input = true;
        first_low = p;
      }
      if (s == Source::kFp32 && !fp32_input) {
        fp32_input = true;
        first_fp32 = p;
        fp32_name = v->name();
      }
    }
    if (fp32_input)
      decide(i, Precision::kFp32, Rule::kInputFp32,
             "input '" + fp32_name + "' is fp32" + (first_fp32 == kNone ? "" : " (from " + ref(first_fp32) + ")"),
             first_fp32);
    else if (low_input)
      decide(i, Precision::kLow, Rule::kInputsLow, "all its inputs are low precision", first_low);
    else
      decide(i, Precision::kFp32, Rule::kInputFp32, "no low-precision input (only constants)");
  }

  // Step 5: in topological order, an open op runs low when its inputs are low.
  void follow_inputs() {
    for (int i = 0; i < n_; ++i)
      if (open(i)) decide_by_inputs(i);
  }

  // Step 6 (CastPlacement::kCompute): the clear ops that steps 4-5 made low at the edge of an fp32
  // region run fp32, so the Cast there sits beside the low op that computes. Forward, in graph
  // order: one whose data all comes from fp32 ops is decided as step 5 decides it (fp32: its inputs
  // are). Backward: one whose data all goes to fp32 ops runs fp32 beside them. An op whose
  // precision another low op's decision read (a step-5 consumer, or a clear op step 4 reached from
  // it) stays low, so no other decision changes, the values do not change (these ops move or
  // select data, which commutes with rounding), and colouring the rewritten model (Casts included)
  // decides every op the same way again.
  void fp32_clear_edges() {
    const int clear = static_cast<int>(OpCategory::kClear);
    // A low neighbour whose decision read this op's precision: a step-5 consumer (it read every
    // input), or a clear op that step 4 made low from this one. Such an op is left low.
    const auto read_by_others = [&](int i) {
      for (int c : fanout_[i])
        if (low(c) && decided_by(c, Rule::kInputsLow)) return true;
      for (const auto* list : {&fanin_[i], &fanout_[i]})
        for (int nb : *list)
          if (low(nb) && decided_by(nb, Rule::kNextToLow) && d_.nodes[nb].decision.from == ref(i)) return true;
      return false;
    };
    const auto movable = [&](int i) {
      return category_[i] == clear && low(i) &&
             (decided_by(i, Rule::kNextToLow) || decided_by(i, Rule::kInputsLow)) && !read_by_others(i);
    };
    const auto all_fp32 = [&](const std::vector<int>& nbs) {
      if (nbs.empty()) return false;
      for (int nb : nbs)
        if (!decided_[nb] || d_.nodes[nb].decision.precision != Precision::kFp32) return false;
      return true;
    };
    for (int i = 0; i < n_; ++i)
      if (movable(i) && all_fp32(fanin_[i])) decide_by_inputs(i);  // fp32: its inputs are
    for (int i = n_ - 1; i >= 0; --i)
      if (movable(i) && all_fp32(fanout_[i]))
        next_to_fp32(i, fanout_[i].front());
  }

  // One text for both parts of step 6, so that colouring a rewritten model, where the second part's
  // ops may be reached by the first, records the same decisions.
  void next_to_fp32(int i, int reader) {
    decide(i, Precision::kFp32, Rule::kNextToFp32,
           "data movement next to fp32 " + ref(reader) + ": the Cast goes beside the op that computes (cast placement "
           "'compute')",
           reader);
  }

  // The decided nodes that read node i's floating data as data, looking through Casts between float
  // types (a Cast's readers stand for it), in node order.
  std::vector<int> data_readers(int i) const {
    std::vector<int> out;
    std::vector<const Value*> values;
    for (size_t o : d_.nodes[i].typing.data_outputs) values.push_back(node(i)->output(o));
    for (size_t k = 0; k < values.size(); ++k)
      for (const Use& u : values[k]->uses()) {
        const Node* c = u.node;
        if (c->domain().empty() && c->op_type() == "Cast" && is_floating(c->output(0)->dtype())) {
          values.push_back(c->output(0));
          continue;
        }
        const int r = index_of(c);
        if (r == kNone || !decided_[r]) continue;
        const auto& ins = d_.nodes[r].typing.data_inputs;
        if (std::find(ins.begin(), ins.end(), u.index) != ins.end()) out.push_back(r);
      }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Step 6, second part (CastPlacement::kCompute): a low clear op whose data all comes from low
  // ops (no constant among it) and that an fp32 op reads, maybe beside low ones (a patch embedding's
  // Reshape and Transpose read by a LayerNorm and by the residual Add) runs fp32: the Cast to fp32
  // then sits beside the low op that computed the values, and the Cast back beside the low readers.
  // Its results are low-precision numbers either way (clear ops move, select or compare), so every
  // reader reads what it read before and no decision changes; a runtime that computes float16 ops in float32 (ONNX Runtime's CPU provider)
  // rounds there no longer. In reverse graph order, so a chain moves from its fp32 end back to the
  // op that computed it. Colouring the rewritten model decides the same: step 5 reads through the
  // Casts to the same low sources, and this step finds the same readers through them.
  void fp32_low_values_read_in_fp32() {
    const int clear = static_cast<int>(OpCategory::kClear);
    for (int i = n_ - 1; i >= 0; --i) {
      if (category_[i] != clear || !low(i) ||
          !(decided_by(i, Rule::kNextToLow) || decided_by(i, Rule::kInputsLow)))
        continue;
      bool low_sources = !d_.nodes[i].typing.data_inputs.empty();
      for (size_t in : d_.nodes[i].typing.data_inputs) {
        const Value* v = node(i)->input(in);
        int p;
        low_sources = low_sources && source_of(v, &p) == Source::kLow;
      }
      if (!low_sources) continue;
      int fp32_reader = kNone;
      for (int r : data_readers(i))
        if (d_.nodes[r].decision.precision == Precision::kFp32) {
          fp32_reader = r;
          break;
        }
      if (fp32_reader == kNone) continue;
      next_to_fp32(i, fp32_reader);
    }
  }

  const Model& m_;
  const AmpPolicy& policy_;
  AmpDecisions& d_;
  NodeTyper typer_;
  int n_ = 0;
  std::vector<int> category_;  // OpCategory of open candidates, kNone otherwise
  std::vector<bool> decided_;
  std::vector<std::vector<int>> fanin_, fanout_;
};

}  // namespace

Decision cast_decision(const Node& cast) {
  const DType to = static_cast<DType>(cast.attr_int("to", 0));
  const Precision p = is_low_precision(to) ? Precision::kLow : to == DType::kFloat ? Precision::kFp32 : Precision::kNone;
  return Decision{p, Rule::kCast, "Cast to " + std::string(dtype_name(to)) + ": its type is its 'to' attribute", "", {}};
}

AmpDecisions colour(const Model& m, const AmpPolicy& policy) {
  AmpDecisions d;
  Colouring(m, policy, d).run();
  return d;
}

std::vector<std::string> explain(const AmpDecisions& d, const NodeDecision& node) {
  std::vector<std::string> lines;
  const NodeDecision* at = &node;
  for (size_t hops = 0; at && hops <= d.nodes.size(); ++hops) {
    const Decision& dec = at->decision;
    lines.push_back(at->ref + ": " + precision_name(dec.precision, d.target) + ", " + rule_name(dec.rule) + ": " +
                    dec.reason);
    if (!dec.measurements.empty()) {
      std::string m;
      for (const auto& [key, value] : dec.measurements) m += (m.empty() ? "" : ", ") + key + "=" + value;
      lines.push_back("  measured: " + m);
    }
    at = dec.from.empty() ? nullptr : d.find(dec.from);
  }
  return lines;
}

}  // namespace amp
