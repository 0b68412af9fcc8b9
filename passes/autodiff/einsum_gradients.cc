// Einsum's gradient (MaxViT's attention products): operand k's is an Einsum of dY with the other
// operands back to k's term — "out, other terms -> term k" — the rule PyTorch's einsum backward
// follows through its products. A term with a repeated letter (a diagonal), or a letter that only
// its own term has (summed away before the product), has none here; the error names it.
#include <algorithm>

#include "graph/ops/einsum.h"
#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

std::vector<Value*> einsum(GradContext& c) {
  const std::string equation = c.node.attr_string("equation", "");
  const EinsumEquation e = parse_einsum(equation, c.node.inputs().size());
  std::vector<Value*> g(c.node.inputs().size(), nullptr);
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    if (!c.wants(k)) continue;
    const std::string& term = e.inputs[k];
    std::string others;
    std::vector<Value*> in{c.dy[0]};
    std::string seen = e.output;
    for (size_t j = 0; j < e.inputs.size(); ++j) {
      if (j == k) continue;
      others += "," + e.inputs[j];
      seen += e.inputs[j];
      in.push_back(c.x(j));
    }
    for (char ch : term) {
      if (std::count(term.begin(), term.end(), ch) > 1)
        c.fail("no gradient for Einsum '" + equation + "': letter '" + std::string(1, ch) + "' repeats in term '" + term + "'");
      if (seen.find(ch) == std::string::npos)
        c.fail("no gradient for Einsum '" + equation + "': letter '" + std::string(1, ch) + "' of term '" + term +
               "' is summed away before the product");
    }
    std::vector<Attribute> a;
    a.push_back(Attribute::of_string("equation", e.output + others + "->" + term));
    g[k] = c.b.emit("Einsum", in, {c.x(k)->type()}, std::move(a))[0];
  }
  return g;
}

}  // namespace

void add_einsum_gradients(GradRuleTable& t) { t["Einsum"] = einsum; }

}  // namespace amp
