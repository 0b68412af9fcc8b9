#include "backends/cuda/layer_norm_residual_fusion.h"

#include <utility>

#include "backends/cuda/node_patterns.h"
#include "backends/cuda/normalization_ops.h"
#include "graph/amp_ops.h"

namespace amp::cuda {
namespace {

bool low(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

}  // namespace

std::vector<UnitMatch> match_layer_norm_residual(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<UnitMatch> out;
  for (const Node* n : g.nodes()) {
    if (n->domain() != kAmpDomain || n->op_type() != "LayerNormalizationGrad" || excluded(n) || n->inputs().size() < 3)
      continue;
    const Value* dx = n->output(0);
    if (!dx || dx->dtype() != DType::kFloat) continue;
    const Node* add = only_reader(dx);
    if (!is_op(add, "Add") || excluded(add) || add->inputs().size() != 2 || add->output(0)->dtype() != DType::kFloat)
      continue;
    const Value* r = add->input(0) == dx ? add->input(1) : add->input(0);
    if (!r || r == dx || r->dtype() != DType::kFloat) continue;
    UnitMatch m;
    m.nodes = {n, add};
    m.inputs = {n->input(0), n->input(1), n->input(2), r};
    const Value* dy = n->input(0);
    const Node* widen = dy ? dy->producer() : nullptr;
    if (is_op(widen, "Cast") && !excluded(widen) && only_reader(dy) == n && dy->dtype() == DType::kFloat &&
        widen->input(0) && low(widen->input(0)->dtype())) {
      m.nodes.push_back(widen);
      m.inputs[0] = widen->input(0);
    }
    const Value* sum = add->output(0);
    const Value* narrowed = nullptr;
    auto narrowing = [&](const Node* c) {
      return is_op(c, "Cast") && !excluded(c) && c->output(0) && low(c->output(0)->dtype());
    };
    for (const Use& u : sum->uses()) {
      if (narrowing(u.node)) {
        narrowed = u.node->output(0);
        m.nodes.push_back(u.node);
        break;
      }
      // Autodiff's SumToShape of the sum, then the Cast: where a plan's dims make the SumToShape sum
      // nothing (GPT-2's blocks: the gradient reaching the projection before the residual Add),
      // the unit narrows the sum itself; where they do not, it sums as SumToShape does, then
      // narrows (normalization_ops.cc).
      const Node* sts = u.node;
      if (sts->domain() != kAmpDomain || sts->op_type() != "SumToShape" || excluded(sts) || sts->input(0) != sum)
        continue;
      const Node* cast = only_reader(sts->output(0));
      if (!narrowing(cast)) continue;
      narrowed = cast->output(0);
      m.nodes.push_back(sts);
      m.nodes.push_back(cast);
      break;
    }
    m.outputs = {sum, n->outputs().size() > 1 ? n->output(1) : nullptr, n->outputs().size() > 2 ? n->output(2) : nullptr,
                 narrowed};
    m.op = make_layer_norm_grad(*n);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<UnitMatch> match_residual_layer_norm(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<UnitMatch> out;
  for (const Node* n : g.nodes()) {
    if (!is_op(n, "LayerNormalization") || excluded(n) || n->inputs().size() < 2 || !n->input(0)) continue;
    const Value* x = n->input(0);
    const Node* add = x->producer();
    if (!is_op(add, "Add") || excluded(add) || add->inputs().size() != 2 || x->dtype() != DType::kFloat ||
        !add->input(0) || !add->input(1))
      continue;
    UnitMatch m;
    m.nodes = {n, add};
    // Each operand as stored: past a widening Cast only the Add reads.
    const Value* operands[2];
    for (int k = 0; k < 2; ++k) {
      const Value* v = add->input(k);
      const Node* widen = v->producer();
      if (is_op(widen, "Cast") && !excluded(widen) && only_reader(v) == add && v->dtype() == DType::kFloat &&
          widen->input(0) && low(widen->input(0)->dtype())) {
        m.nodes.push_back(widen);
        v = widen->input(0);
      }
      operands[k] = v;
    }
    if (operands[0]->dtype() != DType::kFloat && operands[1]->dtype() == DType::kFloat) std::swap(operands[0], operands[1]);
    // Y narrowed by the Cast that alone reads it, as the schedule absorbs one for any op writing any float type.
    const Value* y = n->output(0);
    const Node* narrow = y ? only_reader(y) : nullptr;
    if (y && y->dtype() == DType::kFloat && is_op(narrow, "Cast") && !excluded(narrow) && narrow->output(0) &&
        low(narrow->output(0)->dtype())) {
      m.nodes.push_back(narrow);
      y = narrow->output(0);
    }
    const size_t results = n->outputs().size();
    m.inputs = {operands[0], n->input(1), n->inputs().size() > 2 ? n->input(2) : nullptr, operands[1]};
    m.outputs = {y, results > 1 ? n->output(1) : nullptr, results > 2 ? n->output(2) : nullptr,
                 only_reader(x) == n ? nullptr : x};
    m.op = make_layer_norm(*n);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace amp::cuda
