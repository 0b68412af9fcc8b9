#include "backends/cpu/fused_steps.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/elementwise_grouping.h"

namespace amp::cpu {

void fuse_elementwise_steps(const Model& m, const std::vector<std::string>& keep, Program& p,
                            std::vector<const Node*>& nodes, std::vector<std::optional<FusedStep>>& fused,
                            std::vector<int>& origin) {
  fused.assign(p.steps.size(), std::nullopt);
  origin.resize(p.steps.size());
  for (size_t s = 0; s < origin.size(); ++s) origin[s] = static_cast<int>(s);
  const Graph& g = *m.graph;
  if (!g.is_topologically_sorted()) return;
  const std::vector<std::vector<Node*>> groups = find_elementwise_group_nodes(g, 2);
  if (groups.empty()) return;

  std::unordered_map<const Node*, int> step_of;
  for (size_t s = 0; s < nodes.size(); ++s) step_of.emplace(nodes[s], static_cast<int>(s));
  std::vector<std::vector<int>> readers(p.values.size());
  for (size_t s = 0; s < p.steps.size(); ++s)
    for (int in : p.steps[s].in)
      if (in >= 0) readers[static_cast<size_t>(in)].push_back(static_cast<int>(s));
  std::vector<bool> kept(p.values.size(), false);
  for (int v : p.outputs) kept[static_cast<size_t>(v)] = true;
  for (const std::string& name : keep)
    if (const int v = p.find(name); v >= 0) kept[static_cast<size_t>(v)] = true;

  // The new steps, each with the old position it takes: a fused step that of its last member.
  struct NewStep {
    Program::Step step;
    const Node* node = nullptr;
    std::optional<FusedStep> fused;
    size_t at = 0;
  };
  std::vector<NewStep> out;
  std::vector<bool> member(p.steps.size(), false);
  for (const std::vector<Node*>& group : groups) {
    std::vector<int> steps;
    for (const Node* n : group) {
      auto it = step_of.find(n);
      if (it == step_of.end()) break;  // a node of a subgraph: leave the group alone
      steps.push_back(it->second);
    }
    if (steps.size() != group.size()) continue;
    std::vector<ProgramPart> parts;
    for (size_t k = 0; k < group.size(); ++k) {
      std::vector<const Value*> inputs;
      ProgramPart part{node_program(*group[k], &inputs), {}, {p.steps[static_cast<size_t>(steps[k])].out.at(0)}};
      for (const Value* v : inputs) part.inputs.push_back(p.find(v->name()));
      parts.push_back(std::move(part));
    }
    std::vector<const ProgramPart*> ptrs;
    for (const ProgramPart& part : parts) ptrs.push_back(&part);
    const std::unordered_set<int> in_group(steps.begin(), steps.end());
    const ProgramPart merged = merge_programs(ptrs, [&](int v) {
      if (kept[static_cast<size_t>(v)]) return true;
      const auto& r = readers[static_cast<size_t>(v)];
      return std::any_of(r.begin(), r.end(), [&](int s) { return !in_group.count(s); });
    });
    NewStep ns;
    const Program::Step& first = p.steps[static_cast<size_t>(steps.front())];
    ns.step.op = kFusedElementwiseOp;
    ns.step.domain = kAmpDomain;
    ns.step.opset = 1;
    ns.step.in = merged.inputs;
    ns.step.out = merged.outputs;
    FusedStep f{merged.program, {}, {}};
    for (int s : steps)
      for (int v : p.steps[static_cast<size_t>(s)].out)
        if (v >= 0 && std::find(merged.outputs.begin(), merged.outputs.end(), v) == merged.outputs.end())
          f.internal.push_back(v);
    for (int s : steps) f.summary += (f.summary.empty() ? "" : "+") + p.steps[static_cast<size_t>(s)].op;
    ns.step.where = first.where + " (fused " + f.summary + ")";
    ns.fused = std::move(f);
    ns.at = static_cast<size_t>(*std::max_element(steps.begin(), steps.end()));
    for (int s : steps) member[static_cast<size_t>(s)] = true;
    out.push_back(std::move(ns));
  }
  if (out.empty()) return;
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (!member[s]) out.push_back({std::move(p.steps[s]), nodes[s], std::nullopt, s});

  // Run order: dependencies first, otherwise the old positions (a value a fused step makes may be
  // read by a step that came before the group's last member).
  std::vector<int> producer(p.values.size(), -1);
  for (size_t i = 0; i < out.size(); ++i)
    for (int v : out[i].step.out)
      if (v >= 0) producer[static_cast<size_t>(v)] = static_cast<int>(i);
  std::vector<std::vector<size_t>> deps(out.size());
  std::vector<size_t> key(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    key[i] = out[i].at;
    for (int v : out[i].step.in)
      if (v >= 0 && producer[static_cast<size_t>(v)] >= 0) deps[i].push_back(static_cast<size_t>(producer[static_cast<size_t>(v)]));
  }
  const std::vector<size_t> order = ordered_topological_sort(deps, key);
  if (order.size() != out.size()) throw Error(p.path + ": internal: fused elementwise steps form a cycle");

  p.steps.clear();
  nodes.clear();
  fused.clear();
  origin.clear();
  for (Program::Val& v : p.values) v.producer = -1;
  for (size_t i : order) {
    for (int v : out[i].step.out)
      if (v >= 0) p.values[static_cast<size_t>(v)].producer = static_cast<int>(p.steps.size());
    p.steps.push_back(std::move(out[i].step));
    nodes.push_back(out[i].node);
    fused.push_back(std::move(out[i].fused));
    origin.push_back(static_cast<int>(out[i].at));
  }
}

}  // namespace amp::cpu
