// Gradients of MatMul and Gemm: products with the other operand transposed, as standard ops.
#include <utility>

#include "passes/autodiff/gradient_rules.h"

namespace amp {

namespace {

using Grads = std::vector<Value*>;

// v with its last two axes swapped. When v is itself such a swap (x @ W^T, as PyTorch exports a
// Linear layer), that is the swap's own input: the product reads W as it is stored instead of a
// transpose of a transpose.
Value* swap_last_two(GraphBuilder& b, Value* v, int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  Node* t = v->producer();
  if (t && t->domain().empty() && t->op_type() == "Transpose" && t->attr("perm") && t->attr_ints("perm") == perm &&
      t->input(0))
    return t->input(0);
  return b.transpose(v, perm);
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// numpy matmul semantics: 1-D operands are promoted to matrices and the added axis dropped again;
// batch axes broadcast and their gradients are summed back.
Grads matmul(GradContext& c) {
  GraphBuilder& b = c.b;
  Value* a = c.x(0);
  Value* m = c.x(1);
  Value* dy = c.dy[0];
  const int64_t ra = rank_of(a), rb = rank_of(m);
  if (ra < 1 || rb < 1) c.fail("the ranks of both operands must be known");
  Grads g(2);
  if (ra == 1 && rb == 1) {  // a dot product
    if (c.wants(0)) g[0] = b.mul(dy, m);
    if (c.wants(1)) g[1] = b.mul(dy, a);
    return g;
  }
  if (ra == 1) {  // a [K], m [..., K, N], dy [..., N]
    Value* dy2 = b.unsqueeze(dy, {-2});
    if (c.wants(0)) g[0] = b.reduce_sum(b.matmul(dy2, swap_last_two(b, m, rb)), iota(rb - 1), false);
    if (c.wants(1)) g[1] = b.matmul(b.unsqueeze(a, {-1}), dy2);
    return g;
  }
  if (rb == 1) {  // a [..., M, K], m [K], dy [..., M]
    Value* dy2 = b.unsqueeze(dy, {-1});
    if (c.wants(0)) g[0] = b.matmul(dy2, b.unsqueeze(m, {0}));
    if (c.wants(1)) {
      std::vector<int64_t> axes = iota(ra - 2);
      axes.push_back(ra - 1);
      g[1] = b.reduce_sum(b.matmul(swap_last_two(b, a, ra), dy2), axes, false);
    }
    return g;
  }
  if (c.wants(0)) {
    // Against a matrix (a weight), a's batch axes are the result's, none broadcast: dA is a's
    // shape as it comes, with no SumToShape for a backend to see through (a Linear's input
    // gradient then feeds the next op's gradient directly: GeluGrad, the ReLU's Where).
    Value* da = b.matmul(dy, swap_last_two(b, m, rb));
    g[0] = rb == 2 ? da : c.sum_to_input(da, 0, 2);
  }
  if (c.wants(1)) {
    const Shape* ms = &*m->type().shape;
    if (rb == 2 && ra > 2 && ms->is_static()) {
      // A weight shared by every batch row: one [K, rows] x [rows, N] product instead of a batched
      // product summed afterwards.
      const int64_t k = *ms->dims[0].value, n = *ms->dims[1].value;
      Value* rows = b.reshape(a, b.int64s({-1, k}));
      g[1] = b.matmul(b.transpose(rows, {1, 0}), b.reshape(dy, b.int64s({-1, n})));
    } else {
      g[1] = c.sum_to_input(b.matmul(swap_last_two(b, a, ra), dy), 1, 2);
    }
  }
  return g;
}

// Y = alpha A' B' + beta C with A' = transA ? A^T : A and B' likewise. Each gradient is one Gemm
// whose transpose flags absorb the transposes.
Grads gemm(GradContext& c) {
  GraphBuilder& b = c.b;
  const int64_t ta = c.node.attr_int("transA", 0), tb = c.node.attr_int("transB", 0);
  const float alpha = c.node.attr_float("alpha", 1.0f), beta = c.node.attr_float("beta", 1.0f);
  Value* dy = c.dy[0];
  auto product = [&](Value* p, Value* q, int64_t tp, int64_t tq) {
    return b.same("Gemm", {p, q},
                  attrs(Attribute::of_float("alpha", alpha), Attribute::of_int("transA", tp), Attribute::of_int("transB", tq)));
  };
  Grads g(3);
  if (c.wants(0)) g[0] = ta ? product(c.x(1), dy, tb, 1) : product(dy, c.x(1), 0, 1 - tb);
  if (c.wants(1)) g[1] = tb ? product(dy, c.x(0), 1, ta) : product(c.x(0), dy, 1 - ta, 0);
  if (c.wants(2)) {
    Value* scaled = beta == 1.0f ? dy : b.mul(dy, b.scalar(beta, dy->dtype()));
    g[2] = c.sum_to_input(scaled, 2);
  }
  return g;
}

}  // namespace

void add_matmul_gradients(GradRuleTable& t) {
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
}

}  // namespace amp
