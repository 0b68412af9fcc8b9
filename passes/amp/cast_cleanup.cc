#include "passes/amp/cast_cleanup.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>

namespace amp {

bool widens_exactly(DType from, DType to) {
  if (from == to) return true;
  if (to == DType::kDouble) return from == DType::kFloat || from == DType::kFloat16 || from == DType::kBFloat16;
  if (to == DType::kFloat) return from == DType::kFloat16 || from == DType::kBFloat16;
  return false;
}

namespace {

bool is_cast(const Node* n) { return n && n->domain().empty() && n->op_type() == "Cast" && n->output(0) && n->input(0); }
DType cast_to(const Node* n) { return static_cast<DType>(n->attr_int("to", 0)); }

class Cleanup {
 public:
  explicit Cleanup(std::map<std::string, int64_t>& stats) : stats_(stats) {}

  bool graph(Graph& g) {
    bool changed = false;
    for (Node* n : g.nodes())
      for (Graph* sub : n->subgraphs()) changed |= graph(*sub);
    for (bool again = true; again;) {
      again = false;
      std::map<std::pair<Value*, DType>, Value*> first_cast;
      std::unordered_set<Node*> removed;
      for (Node* c : g.node_vector()) {
        if (removed.count(c) || !is_cast(c)) continue;
        Value* out = c->output(0);
        Value* in = c->input(0);
        const DType to = cast_to(c);
        Node* p = in->producer();
        Value* replacement = nullptr;
        const char* why = nullptr;
        if (in->dtype() == to) {
          replacement = in;
          why = "no-op casts removed";
        } else if (is_cast(p) && widens_exactly(p->input(0)->dtype(), cast_to(p))) {
          c->set_input(0, p->input(0));  // may make c a no-op or a duplicate: the next sweep sees it
          count("exact chains shortened");
          again = true;
          continue;
        } else if (auto [it, fresh] = first_cast.try_emplace({in, to}, out); !fresh) {
          replacement = it->second;
          why = "duplicate casts merged";
        } else if (out->uses().empty() && !out->is_output()) {
          why = "dead casts removed";
        }
        if (!why || out->is_output()) continue;
        if (replacement) g.replace_all_uses(out, replacement);
        g.remove_node(c);
        removed.insert(c);
        count(why);
        again = true;
      }
      changed |= again;
    }
    return changed;
  }

 private:
  void count(const char* key) { ++stats_[key]; }
  std::map<std::string, int64_t>& stats_;
};

}  // namespace

bool CastCleanupPass::run(Model& m) {
  stats_.clear();
  return Cleanup(stats_).graph(*m.graph);
}

}  // namespace amp
