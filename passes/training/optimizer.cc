#include "passes/training/optimizer.h"

#include "passes/graph_builder.h"

namespace amp {

std::optional<OptimizerSpec::Kind> optimizer_kind_from_name(const std::string& name) {
  if (name == "sgd") return OptimizerSpec::Kind::kSgd;
  if (name == "adam") return OptimizerSpec::Kind::kAdam;
  if (name == "adamw") return OptimizerSpec::Kind::kAdamW;
  return std::nullopt;
}

const char* optimizer_kind_name(OptimizerSpec::Kind k) {
  switch (k) {
    case OptimizerSpec::Kind::kSgd: return "sgd";
    case OptimizerSpec::Kind::kAdam: return "adam";
    case OptimizerSpec::Kind::kAdamW: return "adamw";
  }
  return "?";
}

namespace {

constexpr DType kF32 = DType::kFloat;

struct Step {
  TrainingGraph& tg;
  GraphBuilder& b;
  Value* allowed;  // null: every run updates

  Value* c(double v) { return b.scalar(v, kF32); }
  // state <- next, or <- Where(allowed, next, state) when the step may be skipped.
  void update(Value* state, Value* next) {
    tg.bind_update(state, allowed ? b.where(allowed, next, state) : next);
  }
  Value* zeros_like(const TrainedParam& p, const char* what) {
    return tg.add_state(p.value->name() + "." + what, Tensor(kF32, p.value->initializer().dims));
  }
};

// torch.optim.SGD: d = g + wd p; buf = momentum buf + d (buf starts at d, which is what a zero
// buffer gives); d = nesterov ? d + momentum buf : buf; p -= lr d.
void sgd(Step& s, const OptimizerSpec& o, TrainedParam& p, Value* w) {
  Value* d = p.grad;
  if (o.weight_decay != 0) d = s.b.add(d, s.b.mul(w, s.c(o.weight_decay)));
  if (o.momentum != 0) {
    Value* buf = s.zeros_like(p, "momentum_buffer");
    Value* next = s.b.add(s.b.mul(buf, s.c(o.momentum)), d);
    s.update(buf, next);
    d = o.nesterov ? s.b.add(d, s.b.mul(next, s.c(o.momentum))) : next;
  }
  s.update(p.value, s.b.cast(s.b.sub(w, s.b.mul(s.tg.lr, d)), p.value->dtype()));
}

// Adam's per-step scalars, computed once for all parameters: on a GPU, where every parameter's
// update is one fused kernel, they are one tiny launch rather than a copy per parameter.
struct AdamScalars {
  Value* decay = nullptr;        // AdamW: 1 - lr wd (null without decay)
  Value* step_size = nullptr;    // lr / (1 - b1^t)
  Value* sqrt_correction2 = nullptr;  // sqrt(1 - b2^t)
};

AdamScalars adam_scalars(Step& s, const OptimizerSpec& o, Value* t) {
  GraphBuilder& b = s.b;
  AdamScalars a;
  if (o.kind == OptimizerSpec::Kind::kAdamW && o.weight_decay != 0)
    a.decay = b.sub(s.c(1), b.mul(s.tg.lr, s.c(o.weight_decay)));
  Value* correction1 = b.sub(s.c(1), b.same("Pow", {s.c(o.beta1), t}));
  Value* correction2 = b.sub(s.c(1), b.same("Pow", {s.c(o.beta2), t}));
  a.sqrt_correction2 = b.sqrt(correction2);
  a.step_size = b.div(s.tg.lr, correction1);
  return a;
}

// torch.optim.Adam / AdamW (single-tensor path): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
// p -= lr / (1 - b1^t) · m / (sqrt(v) / sqrt(1 - b2^t) + eps), AdamW first decays p by 1 - lr wd.
void adam(Step& s, const OptimizerSpec& o, TrainedParam& p, Value* w, const AdamScalars& a) {
  GraphBuilder& b = s.b;
  Value* g = p.grad;
  if (a.decay) w = b.mul(w, a.decay);
  if (o.kind == OptimizerSpec::Kind::kAdam && o.weight_decay != 0) g = b.add(g, b.mul(w, s.c(o.weight_decay)));
  Value* m = s.zeros_like(p, "exp_avg");
  Value* v = s.zeros_like(p, "exp_avg_sq");
  Value* m_next = b.add(b.mul(m, s.c(o.beta1)), b.mul(g, s.c(1.0 - static_cast<double>(o.beta1))));
  Value* v_next = b.add(b.mul(v, s.c(o.beta2)), b.mul(b.mul(g, g), s.c(1.0 - static_cast<double>(o.beta2))));
  Value* denom = b.add(b.div(b.sqrt(v_next), a.sqrt_correction2), s.c(o.epsilon));
  s.update(m, m_next);
  s.update(v, v_next);
  s.update(p.value, b.cast(b.sub(w, b.mul(a.step_size, b.div(m_next, denom))), p.value->dtype()));
}

}  // namespace

bool OptimizerPass::run(Model& m) {
  Graph& g = *m.graph;
  GraphBuilder b(g);
  tg_.lr = g.add_input(g.fresh_name(StepNames::kLearningRate), ValueType::tensor(kF32, Shape::of({})));
  Step s{tg_, b, tg_.all_finite || tg_.apply ? tg_.update_allowed() : nullptr};
  AdamScalars scalars;
  if (spec_.kind != OptimizerSpec::Kind::kSgd) {  // Adam's step count: state, so skipped steps do not count
    Value* count_state = tg_.add_state(StepNames::kOptimizerStep, Tensor(kF32, {}));
    Value* t = b.add(count_state, s.c(1));
    s.update(count_state, t);
    scalars = adam_scalars(s, spec_, t);
  }
  for (TrainedParam& p : tg_.params) {
    Value* w = b.cast(p.value, kF32);
    if (spec_.kind == OptimizerSpec::Kind::kSgd)
      sgd(s, spec_, p, w);
    else
      adam(s, spec_, p, w, scalars);
    count("parameters");
  }
  return !tg_.params.empty();
}

}  // namespace amp
