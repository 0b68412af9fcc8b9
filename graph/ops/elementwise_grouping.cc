#include "graph/ops/elementwise_grouping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

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
std::optional<std::string> static_shape_key(const Value* v) {
  if (!v->type().shape) return std::nullopt;
  std::string key;
  for (const Dim& d : v->type().shape->dims) {
    if (d.value) key += std::to_string(*d.value) + ",";
    else if (!d.param.empty()) key += "$" + d.param + ",";
    else return std::nullopt;
  }
  return key;
}

bool is_rank0(const Value* v) { return v->type().shape && v->type().shape->rank() == 0; }

// Do the ops in `from` read, through ops in neither group, anything group `to` computes? Then the
// groups cannot become one kernel: the ops between would have to run both before and after it.
// Other groups count as what they will become, one kernel: reaching any member of one reaches
// the inputs of all its members (two ops of a group may be unrelated, yet run only together).
bool reads_through_outside(const std::vector<FusionCandidate>& ops, const std::vector<int>& from, int from_gid, int to_gid,
                           const std::vector<int>& group_of, const std::vector<std::vector<int>>& members) {
  std::vector<int> stack;
  std::vector<bool> seen(ops.size(), false), expanded(members.size(), false);
  auto group = [&](int op) { return group_of[static_cast<size_t>(op)]; };
  for (int m : from)  // direct reads of `to` are the edges fusion removes: fine
    for (int p : ops[static_cast<size_t>(m)].producers)
      if (group(p) != from_gid && group(p) != to_gid) stack.push_back(p);
  while (!stack.empty()) {
    const int q = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(q)]) continue;
    seen[static_cast<size_t>(q)] = true;
    std::vector<int> unit = {q};  // the ops whose inputs q waits for: its whole group, or itself
    if (group(q) >= 0) {
      if (expanded[static_cast<size_t>(group(q))]) continue;
      expanded[static_cast<size_t>(group(q))] = true;
      unit = members[static_cast<size_t>(group(q))];
      for (int m : unit) seen[static_cast<size_t>(m)] = true;
    }
    for (int m : unit)
      for (int p : ops[static_cast<size_t>(m)].producers) {
        if (group(p) == to_gid) return true;
        if (group(p) != from_gid && !seen[static_cast<size_t>(p)]) stack.push_back(p);
      }
  }
  return false;
}

}  // namespace

FusionGroup make_fusion_group(std::vector<Node*> nodes) {
  FusionGroup group;
  group.nodes = std::move(nodes);
  std::unordered_map<const Value*, int> number;
  std::vector<Value*> by_number;
  auto id = [&](const Value* v) {
    auto [it, fresh] = number.emplace(v, static_cast<int>(by_number.size()));
    if (fresh) by_number.push_back(const_cast<Value*>(v));
    return it->second;
  };
  std::vector<ProgramPart> parts;
  for (const Node* n : group.nodes) {
    std::vector<const Value*> inputs;
    ProgramPart part{node_program(*n, &inputs), {}, {id(n->output(0))}};
    for (const Value* v : inputs) part.inputs.push_back(id(v));
    parts.push_back(std::move(part));
  }
  std::unordered_set<const Node*> members(group.nodes.begin(), group.nodes.end());
  std::vector<const ProgramPart*> ptrs;
  for (const ProgramPart& p : parts) ptrs.push_back(&p);
  ProgramPart merged = merge_programs(ptrs, [&](int v) {
    const Value* value = by_number[static_cast<size_t>(v)];
    return value->is_output() || std::any_of(value->uses().begin(), value->uses().end(),
                                             [&](const Use& u) { return !members.count(u.node); });
  });
  group.program = std::move(merged.program);
  for (int v : merged.inputs) group.inputs.push_back(by_number[static_cast<size_t>(v)]);
  for (int v : merged.outputs) group.outputs.push_back(by_number[static_cast<size_t>(v)]);
  return group;
}

std::vector<std::vector<Node*>> find_elementwise_group_nodes(const Graph& g, size_t min_nodes,
                                                   const std::function<bool(const Node*)>& claimed) {
  if (!g.is_topologically_sorted()) throw Error("elementwise fusion: graph '" + g.name + "' is not topologically sorted");
  const std::vector<Node*> nodes = g.node_vector();
  std::unordered_map<const Node*, int> pos;
  for (Node* n : nodes) pos.emplace(n, static_cast<int>(pos.size()));
  const std::vector<std::optional<std::string>> keys = shape_keys(nodes);
  std::vector<FusionCandidate> ops(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    ops[i].fusable = is_fusable_node(*nodes[i]) && !(claimed && claimed(nodes[i]));
    ops[i].shape = keys[i];
    for (const Value* v : Graph::all_reads(nodes[i]))
      if (v->producer())
        if (auto it = pos.find(v->producer()); it != pos.end()) ops[i].producers.push_back(it->second);
  }
  std::vector<std::vector<Node*>> out;
  for (const std::vector<int>& group : group_fusion_candidates(ops, min_nodes)) {
    out.emplace_back();
    for (int i : group) out.back().push_back(nodes[static_cast<size_t>(i)]);
  }
  return out;
}

bool is_inlined_constant(const Value* v) { return v && scalar_constant(v).has_value(); }

bool is_fusable_node(const Node& n) {
  if (!n.subgraphs().empty()) return false;
  const auto op = elem_op_of(n);
  if (!op || n.outputs().size() != 1 || !fusable_tensor(n.output(0))) return false;
  const size_t arity = static_cast<size_t>(elem_op_info(*op).arity);
  const bool clamp = elem_op_info(*op).form == ElemForm::kClamp;
  const bool fold = elem_op_info(*op).form == ElemForm::kFold;
  if (clamp) {
    if (n.inputs().empty() || n.inputs().size() > 3 || !n.input(0)) return false;
  } else if (fold) {  // Sum, Max, Min of two or more operands: a chain of binary instructions
    if (n.inputs().size() < arity) return false;
    for (const Value* v : n.inputs())
      if (!v) return false;
  } else if (n.inputs().size() != arity) {
    return false;
  }
  for (const Value* v : n.inputs())
    if (v && !fusable_tensor(v)) return false;
  if (clamp)  // the bounds must have x's type (ONNX says so; a lone bound may be absent)
    for (const Value* v : n.inputs())
      if (v && v->dtype() != n.input(0)->dtype()) return false;
  return !n.inputs().empty() && n.input(0);
}

ElementwiseProgram node_program(const Node& n, std::vector<const Value*>* inputs) {
  if (!is_fusable_node(n))
    throw InputError("node " + n.label() + ": op " + n.op_type() +
                     " with these input and output types is not an elementwise op a fused kernel can run");
  ElementwiseProgram p;
  std::unordered_map<const Value*, int> reg;
  auto operand = [&](const Value* v) {
    if (auto it = reg.find(v); it != reg.end()) return it->second;
    ElemInstr in;
    in.dtype = v->dtype();
    if (auto c = scalar_constant(v)) {
      in.op = ElemOp::kConstant;
      in.alpha = c->value;
      p.min_rank = std::max(p.min_rank, c->rank);
    } else {
      in.op = ElemOp::kInput;
      in.input = static_cast<int>(inputs->size());
      inputs->push_back(v);
      p.input_dtypes.push_back(v->dtype());
    }
    return reg[v] = p.add(in);
  };
  ElemInstr in;
  in.op = *elem_op_of(n);
  in.dtype = n.output(0)->dtype();
  const ElemParamValues params = elem_param_values(in.op, n);
  in.alpha = params.alpha;
  in.beta = params.beta;
  const int arity = elem_op_info(in.op).arity;
  if (elem_op_info(in.op).form == ElemForm::kFold && n.inputs().size() > static_cast<size_t>(arity)) {
    // More than two operands fold left in fp32 registers and round once, as the CPU kernel does:
    // the partial results are float32 instructions, the last one the output's type.
    int acc = operand(n.input(0));
    for (size_t i = 1; i < n.inputs().size(); ++i) {
      ElemInstr step = in;
      step.dtype = i + 1 == n.inputs().size() ? in.dtype : DType::kFloat;
      step.args = {acc, operand(n.input(i))};
      acc = p.add(step);
    }
    p.outputs = {acc};
    p.check();
    return p;
  }
  for (int i = 0; i < arity; ++i) {
    if (const Value* v = n.input(static_cast<size_t>(i))) {
      in.args.push_back(operand(v));
      continue;
    }
    // Clip without a bound: the bound is infinite.
    ElemInstr bound;
    bound.op = ElemOp::kConstant;
    bound.dtype = n.input(0)->dtype();
    bound.alpha = (i == 1 ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity();
    in.args.push_back(p.add(bound));
  }
  p.outputs = {p.add(in)};
  p.check();
  return p;
}

ProgramPart merge_programs(const std::vector<const ProgramPart*>& parts, const std::function<bool(int)>& keep) {
  ProgramPart out;
  ElementwiseProgram& p = out.program;
  std::unordered_map<int, int> reg;  // value -> register of the merged program
  for (const ProgramPart* part : parts) {
    std::vector<int> local(part->program.instrs.size());
    for (size_t k = 0; k < part->program.instrs.size(); ++k) {
      ElemInstr in = part->program.instrs[k];
      if (in.op == ElemOp::kInput) {
        const int v = part->inputs.at(static_cast<size_t>(in.input));
        if (auto it = reg.find(v); it != reg.end()) {
          local[k] = it->second;
          continue;
        }
        in.input = static_cast<int>(out.inputs.size());
        out.inputs.push_back(v);
        p.input_dtypes.push_back(in.dtype);
        local[k] = reg[v] = p.add(in);
        continue;
      }
      for (int& a : in.args) a = local[static_cast<size_t>(a)];
      local[k] = p.add(in);
    }
    p.min_rank = std::max(p.min_rank, part->program.min_rank);
    for (size_t j = 0; j < part->outputs.size(); ++j)
      reg[part->outputs[j]] = local[static_cast<size_t>(part->program.outputs[j])];
  }
  for (const ProgramPart* part : parts)
    for (int v : part->outputs)
      if (keep(v) && std::find(out.outputs.begin(), out.outputs.end(), v) == out.outputs.end()) {
        out.outputs.push_back(v);
        p.outputs.push_back(reg.at(v));
      }
  p.check();
  return out;
}

std::vector<std::vector<int>> group_fusion_candidates(const std::vector<FusionCandidate>& ops, size_t min_nodes) {
  std::vector<int> group_of(ops.size(), -1);
  std::vector<std::vector<int>> members;
  std::vector<std::string> group_shape;
  for (size_t i = 0; i < ops.size(); ++i) {
    const FusionCandidate& op = ops[i];
    if (!op.fusable) continue;
    const int self = static_cast<int>(i);
    // The groups of its producers that share its shape; it joins the first it can and pulls the
    // others in where that makes no cycle (AdamW's update reads the new m and the new v, each
    // computed in a group of its own until then).
    std::vector<int> candidates;
    if (op.shape)
      for (int p : op.producers) {
        const int g = group_of[static_cast<size_t>(p)];
        if (g >= 0 && group_shape[static_cast<size_t>(g)] == *op.shape &&
            std::find(candidates.begin(), candidates.end(), g) == candidates.end())
          candidates.push_back(g);
      }
    int gid = -1;
    for (int g : candidates) {
      constexpr int kAlone = -2;  // the op is in no group yet (-1 marks ops in none)
      if (reads_through_outside(ops, {self}, kAlone, g, group_of, members)) continue;
      if (gid < 0) {
        gid = g;
        continue;
      }
      if (reads_through_outside(ops, members[static_cast<size_t>(g)], g, gid, group_of, members) ||
          reads_through_outside(ops, members[static_cast<size_t>(gid)], gid, g, group_of, members))
        continue;
      std::vector<int>& into = members[static_cast<size_t>(gid)];
      for (int m : members[static_cast<size_t>(g)]) group_of[static_cast<size_t>(m)] = gid;
      into.insert(into.end(), members[static_cast<size_t>(g)].begin(), members[static_cast<size_t>(g)].end());
      std::sort(into.begin(), into.end());
      members[static_cast<size_t>(g)].clear();
    }
    if (gid < 0) {
      gid = static_cast<int>(members.size());
      members.emplace_back();
      // An unknown shape gets a key no other op has (keys never start with a NUL), so nothing joins it.
      group_shape.push_back(op.shape ? *op.shape : std::string(1, '\0') + std::to_string(i));
    }
    members[static_cast<size_t>(gid)].push_back(self);
    group_of[i] = gid;
  }
  std::sort(members.begin(), members.end());
  members.erase(std::remove_if(members.begin(), members.end(), [&](const auto& m) { return m.empty() || m.size() < min_nodes; }),
                members.end());
  return members;
}

std::vector<std::optional<std::string>> shape_keys(const std::vector<Node*>& nodes) {
  std::unordered_map<const Value*, std::string> key;
  auto key_of = [&](const Value* v) -> const std::string& {
    if (auto it = key.find(v); it != key.end()) return it->second;
    auto known = static_shape_key(v);
    return key[v] = known ? *known : "?" + v->name();
  };
  std::vector<std::optional<std::string>> out;
  for (const Node* n : nodes) {
    const Value* result = n->output(0);
    if (!result) {
      out.emplace_back();
      continue;
    }
    if (!static_shape_key(result) && is_fusable_node(*n)) {
      // Rank-0 operands broadcast into anything without changing it; the rest must agree.
      std::optional<std::string> shared;
      bool agree = true, any = false;
      for (const Value* v : n->inputs()) {
        if (!v || is_rank0(v)) continue;
        const std::string& k = key_of(v);
        agree = agree && (!any || k == *shared);
        shared = k;
        any = true;
      }
      if (agree) key[result] = any ? *shared : std::string();  // all operands rank 0: a rank-0 result
    }
    out.push_back(key_of(result));
  }
  return out;
}

std::vector<FusionGroup> find_elementwise_groups(const Graph& g, size_t min_nodes,
                                                 const std::function<bool(const Node*)>& claimed) {
  std::vector<FusionGroup> groups;
  for (auto& nodes : find_elementwise_group_nodes(g, min_nodes, claimed)) groups.push_back(make_fusion_group(std::move(nodes)));
  return groups;
}

}  // namespace amp
