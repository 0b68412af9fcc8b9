#include "passes/training/inf_check.h"

#include "graph/amp_ops.h"
#include "passes/graph_builder.h"

namespace amp {

namespace {

// x itself, or the fp16/bf16 value an exact widening Cast to float32 read: checking that is
// checking x, and it leaves the Cast to the unscaling Mul alone.
Value* before_widening(Value* x) {
  const Node* c = x->producer();
  if (!c || !c->domain().empty() || c->op_type() != "Cast" || x->dtype() != DType::kFloat || !c->input(0)) return x;
  const DType from = c->input(0)->dtype();
  return from == DType::kFloat16 || from == DType::kBFloat16 || from == DType::kFloat ? c->input(0) : x;
}

// The value grad was unscaled from, when grad is still that unscaling Mul's result.
Value* unscaled_from(const TrainedParam& p, const Value* inverse) {
  if (!p.scaled_grad || !inverse || !p.grad) return nullptr;
  const Node* mul = p.grad->producer();
  if (!mul || mul->op_type() != "Mul" || mul->inputs().size() != 2) return nullptr;
  const bool match = (mul->input(0) == p.scaled_grad && mul->input(1) == inverse) ||
                     (mul->input(1) == p.scaled_grad && mul->input(0) == inverse);
  return match ? p.scaled_grad : nullptr;
}

}  // namespace

bool InfCheckPass::run(Model& m) {
  if (tg_.params.empty()) return false;
  GraphBuilder b(*m.graph);
  // With loss scaling the check reads the gradients before unscaling, times the inverse scale:
  // the same verdict, and the unscaling can then happen inside the optimizer's own kernel instead
  // of before the check (a backend fusing elementwise work sees no path from the update's inputs
  // through the check back into the update). Likewise it reads fp16/bf16 gradients before their
  // exact widening to fp32, which then happens in the optimizer's kernel too.
  std::vector<Value*> scaled{tg_.inverse_scale};
  for (const TrainedParam& p : tg_.params) {
    Value* raw = unscaled_from(p, tg_.inverse_scale);
    if (!raw) {
      scaled.clear();
      break;
    }
    scaled.push_back(before_widening(raw));
  }
  const ValueType flag = ValueType::tensor(DType::kBool, Shape::of({}));
  if (!scaled.empty()) {
    tg_.all_finite = b.emit("AllFiniteScaled", scaled, {flag}, {}, kAmpDomain)[0];
  } else {
    std::vector<Value*> grads;
    for (const TrainedParam& p : tg_.params) grads.push_back(before_widening(p.grad));
    tg_.all_finite = b.emit("AllFinite", grads, {flag}, {}, kAmpDomain)[0];
  }
  m.graph->rename_value(tg_.all_finite, m.graph->fresh_name(StepNames::kAllFinite));
  m.graph->add_output(tg_.all_finite);
  m.set_opset_version(kAmpDomain, kAmpDomainVersion);
  count("gradients checked", static_cast<int64_t>(tg_.params.size()));
  return true;
}

}  // namespace amp
