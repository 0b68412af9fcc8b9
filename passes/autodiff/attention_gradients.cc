// Gradient of ai.onnx_amp Attention: one AttentionGrad that recomputes the probabilities block by
// block from the forward's saved row log-sum-exp (FlashAttention's backward), so the backward
// keeps Q, K, V, Y and one float per row alive, never batch x heads x T x T.
#include "graph/amp_ops.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

std::vector<Value*> attention(GradContext& c) {
  if (c.dy.size() > 1 && c.dy[1]) c.fail("gradients through the LSE output are not supported");
  if (c.node.outputs().size() < 2 || !c.y(1)) c.fail("the gradient needs the LSE output (output 1)");
  const bool masked = c.node.inputs().size() > 3 && c.x(3);
  const ValueType none;
  std::vector<Value*> in = {c.dy[0], c.x(0), c.x(1), c.x(2), c.y(0), c.y(1)};
  if (masked) in.push_back(c.x(3));
  std::vector<ValueType> types;
  for (size_t i = 0; i < 4; ++i) types.push_back(c.wants(i) ? c.x(i)->type() : none);
  std::vector<Attribute> as;
  as.push_back(Attribute::of_int("is_causal", c.node.attr_int("is_causal", 0)));
  if (c.node.attr("scale"))  // absent: 1/sqrt(d) for both
    as.push_back(Attribute::of_float("scale", c.node.attr_float("scale", 1.0f)));
  auto outs = c.b.emit("AttentionGrad", in, types, std::move(as), kAmpDomain);
  return {outs[0], outs[1], outs[2], outs[3]};
}

}  // namespace

void add_attention_gradients(GradRuleTable& t) { t[std::string(kAmpDomain) + ":Attention"] = attention; }

}  // namespace amp
