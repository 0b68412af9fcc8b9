#include "passes/fusion/elementwise_fusion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"

namespace amp {
namespace {

struct ScalarConstant {
  float value;
  int rank;
};

// A value made by a one-element Constant node becomes an immediate. Initializers never do: in a
// training step they are state (the loss scale, say) and change between runs.
std::optional<ScalarConstant> scalar_constant(const Value* v) {
  const Node* p = v->producer();
  if (!p || p->op_type() != "Constant" || !p->domain().empty()) return std::nullopt;
  if (const Attribute* a = p->attr("value_float")) return ScalarConstant{a->f, 0};
  const Attribute* a = p->attr("value");
  if (!a || a->kind != AttrKind::kTensor || a->t.numel() != 1 || !is_fusable_dtype(a->t.dtype)) return std::nullopt;
  return ScalarConstant{static_cast<float>(a->t.element(0)), static_cast<int>(a->t.dims.size())};
}

bool fusable_tensor(const Value* v) { return v && v->type().is_tensor() && is_fusable_dtype(v->dtype()); }

// "2,$N,64": a static shape or one with named symbolic dims; nothing when any dim is unknown,
// since two unknown dims need not be equal.
std::optional<std::string> shape_key(const Value* v) {
  if (!v->type().shape) return std::nullopt;
  std::string key;
  for (const Dim& d : v->type().shape->dims) {
    if (d.value) key += std::to_string(*d.value) + ",";
    else if (!d.param.empty()) key += "$" + d.param + ",";
    else return std::nullopt;
  }
  return key;
}

std::string node_summary(const std::vector<Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : "+") + n->op_type();
  return s;
}

FusionGroup build_group(std::vector<Node*> nodes) {
  FusionGroup group;
  group.nodes = std::move(nodes);
  std::unordered_set<const Node*> members(group.nodes.begin(), group.nodes.end());
  std::unordered_map<const Value*, int> reg;
  ElementwiseProgram& p = group.program;

  auto operand = [&](Value* v) {
    if (auto it = reg.find(v); it != reg.end()) return it->second;
    int idx;
    if (auto c = scalar_constant(v)) {
      ElemInstr in;
      in.op = ElemOp::kConstant;
      in.dtype = v->dtype();
      in.alpha = c->value;
      idx = p.add(in);
      p.min_rank = std::max(p.min_rank, c->rank);
    } else {
      ElemInstr in;
      in.op = ElemOp::kInput;
      in.dtype = v->dtype();
      in.input = static_cast<int>(group.inputs.size());
      group.inputs.push_back(v);
      p.input_dtypes.push_back(v->dtype());
      idx = p.add(in);
    }
    reg[v] = idx;
    return idx;
  };

  for (Node* n : group.nodes) {
    ElemInstr in;
    in.op = *elem_op_from_onnx(n->op_type());
    in.dtype = n->output(0)->dtype();
    if (in.op == ElemOp::kLeakyRelu) in.alpha = n->attr_float("alpha", 0.01f);
    const int arity = elem_op_info(in.op).arity;
    for (int i = 0; i < arity; ++i) {
      Value* v = n->input(static_cast<size_t>(i));
      if (v) {
        in.args.push_back(operand(v));
        continue;
      }
      // Clip without a bound: the bound is infinite.
      ElemInstr bound;
      bound.op = ElemOp::kConstant;
      bound.dtype = n->input(0)->dtype();
      bound.alpha = (i == 1 ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity();
      in.args.push_back(p.add(bound));
    }
    reg[n->output(0)] = p.add(in);
  }
  for (Node* n : group.nodes) {
    Value* v = n->output(0);
    const bool read_outside = std::any_of(v->uses().begin(), v->uses().end(),
                                          [&](const Use& u) { return !members.count(u.node); });
    if (v->is_output() || read_outside) {
      group.outputs.push_back(v);
      p.outputs.push_back(reg[v]);
    }
  }
  p.check();
  return group;
}

// Does n read, through nodes outside group `gid`, anything the group computes? Then joining would
// make a cycle. Only nodes at or after the group's first position can lead back into it.
bool joining_makes_cycle(const Node* n, int gid, const std::unordered_map<const Node*, int>& group_of,
                         const std::unordered_map<const Node*, size_t>& pos, size_t group_start) {
  auto in_group = [&](const Node* q) {
    auto it = group_of.find(q);
    return it != group_of.end() && it->second == gid;
  };
  std::vector<const Node*> stack;
  std::unordered_set<const Node*> seen;
  for (const Value* v : Graph::all_reads(n))
    if (const Node* q = v->producer(); q && !in_group(q) && pos.count(q) && pos.at(q) >= group_start) stack.push_back(q);
  while (!stack.empty()) {
    const Node* q = stack.back();
    stack.pop_back();
    if (!seen.insert(q).second) continue;
    for (const Value* v : Graph::all_reads(q)) {
      const Node* r = v->producer();
      if (!r || !pos.count(r) || pos.at(r) < group_start) continue;
      if (in_group(r)) return true;
      stack.push_back(r);
    }
  }
  return false;
}

}  // namespace

bool is_fusable_node(const Node& n) {
  if (!n.domain().empty() || !n.subgraphs().empty()) return false;
  const auto op = elem_op_from_onnx(n.op_type());
  if (!op || n.outputs().size() != 1 || !fusable_tensor(n.output(0))) return false;
  const size_t arity = static_cast<size_t>(elem_op_info(*op).arity);
  if (*op == ElemOp::kClip) {
    if (n.inputs().empty() || n.inputs().size() > 3 || !n.input(0)) return false;
  } else if (n.inputs().size() != arity) {
    return false;
  }
  for (const Value* v : n.inputs())
    if (v && !fusable_tensor(v)) return false;
  if (*op == ElemOp::kClip)  // the bounds must have x's type (ONNX says so; a lone bound may be absent)
    for (const Value* v : n.inputs())
      if (v && v->dtype() != n.input(0)->dtype()) return false;
  return !n.inputs().empty() && n.input(0);
}

FusionGroup single_node_group(Node* n) {
  if (!is_fusable_node(*n))
    throw InputError("node " + n->label() + ": op " + n->op_type() +
                     " with these input and output types is not an elementwise op a fused kernel can run");
  return build_group({n});
}

namespace {

// The node lists of the groups; programs are built from them when used, because rewriting one
// group replaces values the next group reads.
std::vector<std::vector<Node*>> find_group_members(const Graph& g, size_t min_nodes,
                                                   const std::function<bool(const Node*)>& claimed) {
  if (!g.is_topologically_sorted()) throw Error("elementwise fusion: graph '" + g.name + "' is not topologically sorted");
  std::unordered_map<const Node*, size_t> pos;
  for (Node* n : g.nodes()) pos.emplace(n, pos.size());

  std::unordered_map<const Node*, int> group_of;
  std::vector<std::vector<Node*>> members;
  std::vector<std::string> group_shape;
  for (Node* n : g.nodes()) {
    if (!is_fusable_node(*n) || (claimed && claimed(n))) continue;
    const auto key = shape_key(n->output(0));
    int gid = -1;
    if (key) {
      for (const Value* v : n->inputs()) {
        if (!v || !v->producer()) continue;
        auto it = group_of.find(v->producer());
        if (it == group_of.end() || group_shape[static_cast<size_t>(it->second)] != *key) continue;
        const size_t start = pos.at(members[static_cast<size_t>(it->second)].front());
        if (!joining_makes_cycle(n, it->second, group_of, pos, start)) {
          gid = it->second;
          break;
        }
      }
    }
    if (gid < 0) {
      gid = static_cast<int>(members.size());
      members.emplace_back();
      // An unknown shape gets a key no other node has, so nothing joins it.
      group_shape.push_back(key ? *key : "?" + std::to_string(gid));
    }
    members[static_cast<size_t>(gid)].push_back(n);
    group_of[n] = gid;
  }

  members.erase(std::remove_if(members.begin(), members.end(), [&](const auto& m) { return m.size() < min_nodes; }),
                members.end());
  return members;
}

}  // namespace

std::vector<FusionGroup> find_elementwise_groups(const Graph& g, size_t min_nodes,
                                                 const std::function<bool(const Node*)>& claimed) {
  std::vector<FusionGroup> groups;
  for (auto& nodes : find_group_members(g, min_nodes, claimed)) groups.push_back(build_group(std::move(nodes)));
  return groups;
}

bool ElementwiseFusion::run(Model& m) {
  bool changed = run_on(*m.graph);
  for (TrainingInfo& t : m.training_info)
    if (t.algorithm) changed |= run_on(*t.algorithm);
  if (changed && m.opset_version(kAmpDomain) == 0) m.set_opset_version(kAmpDomain, 1);
  return changed;
}

bool ElementwiseFusion::run_on(Graph& g) {
  const std::vector<std::vector<Node*>> members = find_group_members(g, min_nodes_, {});
  std::unordered_set<Value*> inlined;
  for (const std::vector<Node*>& nodes : members) {
    const FusionGroup group = build_group(nodes);
    Node* last = group.nodes.back();
    for (Node* n : group.nodes)
      for (Value* v : n->inputs())
        if (v && scalar_constant(v)) inlined.insert(v);

    std::vector<std::string> fresh(group.outputs.size());
    Node* fused = g.add_node(kFusedElementwiseOp, group.inputs, fresh, kAmpDomain, last);
    fused->name = g.fresh_name((group.nodes.front()->name.empty() ? "fused" : group.nodes.front()->name) + "_fused");
    fused->doc_string = node_summary(group.nodes);
    fused->set_attr(Attribute::of_string("program", group.program.to_text()));
    std::vector<std::string> names;
    for (size_t k = 0; k < group.outputs.size(); ++k) {
      Value* old = group.outputs[k];
      fused->output(k)->set_type(old->type());
      names.push_back(old->name());
      g.replace_all_uses(old, fused->output(k));
    }
    for (auto it = group.nodes.rbegin(); it != group.nodes.rend(); ++it) g.remove_node(*it);
    for (size_t k = 0; k < names.size(); ++k) g.rename_value(fused->output(k), names[k]);

    count("groups");
    count("nodes_fused", static_cast<int64_t>(group.nodes.size()));
    count("casts_absorbed", std::count_if(group.nodes.begin(), group.nodes.end(),
                                          [](const Node* n) { return n->op_type() == "Cast"; }));
  }
  for (Value* v : inlined) {
    if (!v->uses().empty() || v->is_output()) continue;
    g.remove_node(v->producer());
    count("constants_inlined");
  }
  if (!members.empty()) g.topological_sort();
  return !members.empty();
}

}  // namespace amp
