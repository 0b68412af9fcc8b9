#include "backends/cuda/matmul_ops.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/node_patterns.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/strided_copy.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// Operands: 0 A, 1 B, 2 C (Gemm, optional), 3 bias (BIAS epilogues), 4 the tensor a bias gradient
// sums (BGRAD epilogues). Results: 0 D, 1 bias gradient.
struct ProductConfig {
  bool gemm = false;  // ONNX Gemm (2-D, flags, alpha/beta, C) rather than MatMul (numpy batching)
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

class ProductOp final : public CudaOp {
 public:
  explicit ProductOp(ProductConfig c) : c_(c) {}
  ProductOp(const Node& n, int64_t) {
    c_.gemm = n.op_type() == "Gemm";
    if (c_.gemm) {
      c_.trans_a = n.attr_int("transA", 0) != 0;
      c_.trans_b = n.attr_int("transB", 0) != 0;
      c_.alpha = n.attr_float("alpha", 1.0f);
      c_.beta = n.attr_float("beta", 1.0f);
    }
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& a = *s.in.at(0);
    const TensorDesc& b = *s.in.at(1);
    const TensorDesc& d = *s.out.at(0);
    if (a.dtype != b.dtype) throw InputError("operands are " + std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)));
    GemmDesc g;
    g.ab_type = a.dtype;
    g.d_type = d.dtype;
    g.alpha = c_.alpha;
    g.epilogue = c_.epilogue;
    // fp32 products may use TF32 Tensor Cores when allowed (--tf32): 7x the fp32 rate on H100 for
    // a 10-bit mantissa in the products (sums stay fp32), the trade PyTorch's allow_tf32 offers.
    g.tf32 = s.tf32;
    g.trans_a = c_.trans_a;
    g.trans_b = c_.trans_b;
    if (c_.gemm && (a.dims.size() != 2 || b.dims.size() != 2)) throw InputError("Gemm takes 2-D A and B");
    // numpy's 1-D promotions (a folded transpose always has rank 2 or more).
    std::vector<int64_t> ad = a.dims, bd = b.dims;
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    if (ad.size() < 2 || bd.size() < 2) throw InputError("MatMul operands need a rank");
    const size_t ra = ad.size(), rb = bd.size();
    g.m = c_.trans_a ? ad[ra - 1] : ad[ra - 2];
    g.k = c_.trans_a ? ad[ra - 2] : ad[ra - 1];
    g.n = c_.trans_b ? bd[rb - 2] : bd[rb - 1];
    const int64_t k_of_b = c_.trans_b ? bd[rb - 1] : bd[rb - 2];
    if (k_of_b != g.k) throw InputError("inner dims differ: " + std::to_string(g.k) + " vs " + std::to_string(k_of_b));
    const int64_t batch_a = product(ad, 0, ra - 2), batch_b = product(bd, 0, rb - 2);
    std::vector<int64_t> pa(ad.begin(), ad.end() - 2), pb(bd.begin(), bd.end() - 2);
    while (pa.size() < pb.size()) pa.insert(pa.begin(), 1);
    while (pb.size() < pa.size()) pb.insert(pb.begin(), 1);
    if (batch_b == 1 && !c_.trans_a) {
      g.m *= batch_a;  // [batch, M, K] rows are one [batch*M, K] matrix
    } else if (batch_b == 1) {
      g.batch = batch_a;  // one B for every batch
      g.stride_a = g.m * g.k;
    } else if (batch_a == 1) {
      g.batch = batch_b;
      g.stride_b = g.k * g.n;
    } else if (pa == pb) {
      g.batch = batch_a;
      g.stride_a = g.m * g.k;
      g.stride_b = g.k * g.n;
    } else {
      throw InputError("MatMul batch dims broadcast on both sides, which the cuda backend does not run");
    }
    // C: a [n] row with beta 1 is the bias epilogue; anything else is expanded into D first and
    // accumulated with beta (cuBLASLt reads C from D's own buffer).
    bool expand_c = false;
    StridedCopy c_copy;
    if (s.has_in(2)) {
      const TensorDesc& c = *s.in[2];
      const bool row = c.numel() == g.n && (c.dims.size() == 1 || (c.dims.size() == 2 && c.dims[0] == 1));
      if (row && c_.beta == 1.0f && g.epilogue == GemmEpilogue::kNone && g.n > 1) {
        g.epilogue = GemmEpilogue::kBias;
      } else if (c_.beta != 0.0f) {
        expand_c = true;
        g.beta = c_.beta;
        g.stride_c = g.m * g.n;
        std::vector<int64_t> cd = c.dims;
        while (cd.size() < 2) cd.insert(cd.begin(), 1);
        const std::vector<int64_t> out = {g.m, g.n};
        c_copy.dims = out;
        c_copy.dst_strides = contiguous_strides(out);
        c_copy.src_strides = {cd[0] == 1 ? 0 : cd[1], cd[1] == 1 ? 0 : 1};
        c_copy.elem_bytes = dtype_size(c.dtype);
        c_copy = simplify(c_copy);
      }
    }
    const bool uses_bias_operand = g.epilogue == GemmEpilogue::kBias || g.epilogue == GemmEpilogue::kReluBias;
    const size_t bias_operand = s.has_in(3) ? 3 : 2;  // fused Add's bias, or Gemm's own C row
    // A bias gradient is ReduceSum(T, every axis but the last). The epilogue's sum over the dY
    // operand equals it when that operand is T's rows: as many elements, T's last dim its length.
    // The matcher sees that from the graph for most, not all, shapes; else the product runs plain
    // and the sum on its own.
    std::shared_ptr<ReducePlan> separate_sum;
    auto sum_separately = [&] {
      g.epilogue = GemmEpilogue::kNone;
      const TensorDesc& summed = *s.in[4];
      std::vector<bool> reduced(summed.dims.size(), true);
      if (!reduced.empty()) reduced.back() = false;
      separate_sum = std::make_shared<ReducePlan>(summed.dtype, summed.dims, reduced, ReduceKind::kSum, ctx.sm_count());
    };
    const bool bias_grad = g.epilogue == GemmEpilogue::kBiasGradFromA || g.epilogue == GemmEpilogue::kBiasGradFromB;
    if (bias_grad) {
      if (!s.has_in(4) || !s.has_out(1)) throw InputError("a bias-gradient product needs the summed tensor");
      const TensorDesc& summed = *s.in[4];
      const bool from_a = g.epilogue == GemmEpilogue::kBiasGradFromA;
      const int64_t length = from_a ? g.m : g.n;
      if (summed.dims.empty() || summed.numel() != (from_a ? a : b).numel() || summed.dims.back() != length ||
          s.out[1]->numel() != length || g.batch != 1)
        sum_separately();
    }
    std::shared_ptr<GemmPlan> plan;
    try {
      plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms());
    } catch (const NoGemmAlgorithm&) {
      // cuBLASLt offers the bias-gradient epilogues for fewer types and shapes than plain
      // products: without one, the same unit runs the product plain and the sum after it.
      if (!bias_grad || separate_sum) throw;
      sum_separately();
      plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms());
    }
    const bool grad_epilogue = g.epilogue == GemmEpilogue::kBiasGradFromA || g.epilogue == GemmEpilogue::kBiasGradFromB;
    const size_t workspace = std::max(plan->workspace_bytes(), separate_sum ? separate_sum->workspace_bytes() : 0);
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& buf, DeviceContext& c) {
          if (expand_c) strided_copy(c_copy, buf.in[2], buf.out[0], c.sm_count(), c.stream());
          void* bias = uses_bias_operand ? const_cast<void*>(buf.in[bias_operand]) : grad_epilogue ? buf.out[1] : nullptr;
          plan->enqueue(c.cublaslt(), c.stream(), buf.in[0], buf.in[1], buf.out[0], buf.out[0], bias, nullptr, buf.workspace);
          if (separate_sum) separate_sum->enqueue(buf.in[4], buf.out[1], buf.workspace, c.stream());
        },
        workspace);
  }

 private:
  ProductConfig c_;
};

// ---- what a product absorbs

std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  if (!v) return std::nullopt;
  const Tensor* t = nullptr;
  if (v->has_initializer()) t = &v->initializer();
  else if (v->producer() && v->producer()->op_type() == "Constant" && v->producer()->attr("value"))
    t = &v->producer()->attr("value")->t;
  if (!t || (t->dtype != DType::kInt64 && t->dtype != DType::kInt32)) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->numel(); ++i) out.push_back(static_cast<int64_t>(t->element(i)));
  return out;
}

// A Transpose that swaps the last two axes and feeds only this product becomes a transpose flag:
// the backward pass of every MatMul is two products with a transposed operand, and without this
// each transposed activation would be written out once more.
bool fold_transpose(const Node* p, const Value*& operand, bool& trans, std::vector<const Node*>& nodes,
                    const std::function<bool(const Node*)>& busy) {
  const Node* t = operand->producer();
  if (!is_op(t, "Transpose") || busy(t) || only_reader(operand) != p) return false;
  const std::vector<int64_t> perm = t->attr_ints("perm");
  const size_t r = perm.size();
  if (r < 2 || (p->op_type() == "Gemm" && r != 2)) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  if (perm[r - 2] != static_cast<int64_t>(r - 1) || perm[r - 1] != static_cast<int64_t>(r - 2)) return false;
  operand = t->input(0);
  trans = !trans;
  nodes.push_back(t);
  return true;
}

// N, from the B operand's static shape (the output's is often unknown after reshapes whose
// shapes are computed).
std::optional<int64_t> columns_of(const Value* b, bool trans_b) {
  if (!b->type().shape || b->type().shape->rank() < 2) return std::nullopt;
  const auto& dims = b->type().shape->dims;
  return trans_b ? dims[dims.size() - 2].value : dims.back().value;
}

// v's rank when the graph fixes it: from its type, or through the Reshape to a constant shape,
// the Transpose or the Cast that made it (training graphs leave such values without shapes).
std::optional<size_t> static_rank(const Value* v) {
  if (!v) return std::nullopt;
  if (v->type().shape) return v->type().shape->rank();
  const Node* p = v->producer();
  if (is_op(p, "Reshape")) {
    if (auto dims = constant_ints(p->input(1))) return dims->size();
  } else if (is_op(p, "Transpose")) {
    if (p->attr("perm")) return p->attr_ints("perm").size();
    return static_rank(p->input(0));
  } else if (is_op(p, "Cast")) {
    return static_rank(p->input(0));
  }
  return std::nullopt;
}

// The bias gradient beside a weight-gradient product whose 2-D operand dY is the output gradient:
// a ReduceSum (keepdims 0) over every axis but the last of dY itself, or of the tensor dY is the
// rows of — autodiff of a Linear over [batch, time, features] reshapes the gradient to 2-D for
// the weight's product and sums the 3-D one for the bias: dY = Reshape(T or SumToShape(T), [r, n]).
// Returns the ReduceSum and the tensor it sums (ProductOp checks the element counts per plan).
std::optional<std::pair<const Node*, const Value*>> bias_sum_of(const Value* dy, DType t,
                                                                const std::function<bool(const Node*)>& busy) {
  std::vector<const Value*> candidates = {dy};
  const Node* reshape = dy->producer();
  if (is_op(reshape, "Reshape")) {
    const Value* rows = reshape->input(0);
    candidates.push_back(rows);
    const Node* sum = rows->producer();
    if (sum && sum->domain() == kAmpDomain && sum->op_type() == "SumToShape") candidates.push_back(sum->input(0));
  }
  for (const Value* summed : candidates) {
    const std::optional<size_t> rank = summed == dy ? std::optional<size_t>(2) : static_rank(summed);
    if (!rank || *rank < 2) continue;
    for (const Use& u : summed->uses()) {
      const Node* r = u.node;
      if (!is_op(r, "ReduceSum") || busy(r) || r->attr_int("keepdims", 1) != 0 || r->output(0)->dtype() != t) continue;
      auto axes = r->input(1) ? constant_ints(r->input(1)) : std::optional<std::vector<int64_t>>(r->attr_ints("axes"));
      if (!axes) continue;
      for (int64_t& axis : *axes)
        if (axis < 0) axis += static_cast<int64_t>(*rank);
      std::sort(axes->begin(), axes->end());
      std::vector<int64_t> leading(*rank - 1);
      std::iota(leading.begin(), leading.end(), int64_t{0});
      if (*axes == leading) return std::make_pair(r, summed);
    }
  }
  return std::nullopt;
}

std::optional<ProductFusion> match_product(const Node* p, const std::function<bool(const Node*)>& busy) {
  const bool gemm = p->op_type() == "Gemm";
  ProductConfig c{gemm, p->attr_int("transA", 0) != 0, p->attr_int("transB", 0) != 0, p->attr_float("alpha", 1.0f),
                  p->attr_float("beta", 1.0f), GemmEpilogue::kNone};
  ProductFusion f;
  f.nodes = {p};
  const Value* a = p->input(0);
  const Value* b = p->input(1);
  const Value* c_input = gemm ? p->input(2) : nullptr;
  fold_transpose(p, a, c.trans_a, f.nodes, busy);
  fold_transpose(p, b, c.trans_b, f.nodes, busy);
  const DType t = p->output(0)->dtype();
  const Value* bias = nullptr;
  const Value* out = p->output(0);

  // Bias: Gemm's own C row (beta 1), or an Add of a [N] row; then maybe a Relu.
  const auto n = columns_of(b, c.trans_b);
  auto is_row = [&](const Value* v) {
    return v && n && *n > 1 && v->type().shape && v->type().shape->rank() == 1 &&
           v->type().shape->dims[0].value == n && v->dtype() == t;
  };
  const Node* add = only_reader(out);
  if (c_input && c.beta == 1.0f && is_row(c_input)) {
    bias = c_input;
    c_input = nullptr;
  } else if (!c_input && is_op(add, "Add") && !busy(add)) {
    const Value* other = add->input(0) == out ? add->input(1) : add->input(0);
    if (is_row(other) && add->output(0)->dtype() == t) {
      bias = other;
      f.nodes.push_back(add);
      out = add->output(0);
    }
  }
  if (bias) {
    c.epilogue = GemmEpilogue::kBias;
    const Node* relu = only_reader(out);
    if (is_op(relu, "Relu") && !busy(relu)) {
      c.epilogue = GemmEpilogue::kReluBias;
      f.nodes.push_back(relu);
      out = relu->output(0);
    }
  }
  f.outputs = {out};

  // D^T = op(B)^T op(A)^T: a 2-D product whose only reader transposes it (dW = (X^T dY)^T, the
  // weight gradient of PyTorch's x @ W^T) computes the transpose directly, operands swapped.
  auto rank2 = [](const Value* v) { return static_rank(v) == std::optional<size_t>(2); };
  if (c.epilogue == GemmEpilogue::kNone && !c_input && rank2(a) && rank2(b)) {
    const Node* tr = only_reader(out);
    if (is_op(tr, "Transpose") && !busy(tr) && tr->output(0)->dtype() == t &&
        (!tr->attr("perm") || tr->attr_ints("perm") == std::vector<int64_t>{1, 0})) {
      std::swap(a, b);
      const bool trans_a = c.trans_a;
      c.trans_a = !c.trans_b;
      c.trans_b = !trans_a;
      f.nodes.push_back(tr);
      out = tr->output(0);
      f.outputs = {out};
    }
  }
  // Weight gradient dW = dY^T X or X^T dY beside db, the sum of dY's rows: one product that also
  // writes the bias gradient.
  const Value* summed = nullptr;
  if (!bias && !c_input && c.trans_a && c.alpha == 1.0f && (gemm || (rank2(a) && rank2(b)))) {
    for (int side = 0; side < 2 && c.epilogue == GemmEpilogue::kNone; ++side) {
      const Value* dy = side == 0 ? a : b;
      if ((side == 1 && c.trans_b) || dy->dtype() != t) continue;
      if (auto found = bias_sum_of(dy, t, busy)) {
        c.epilogue = side == 0 ? GemmEpilogue::kBiasGradFromA : GemmEpilogue::kBiasGradFromB;
        f.nodes.push_back(found->first);
        f.outputs.push_back(found->first->output(0));
        summed = found->second;
      }
    }
  }
  if (f.nodes.size() == 1) return std::nullopt;  // nothing absorbed: the plain table op
  f.inputs = {a, b, c_input, bias, summed};
  f.op = std::make_unique<ProductOp>(c);
  return f;
}

}  // namespace

std::vector<ProductFusion> match_product_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<ProductFusion> out;
  std::vector<const Node*> taken;
  auto busy = [&](const Node* n) { return excluded(n) || std::find(taken.begin(), taken.end(), n) != taken.end(); };
  for (const Node* n : g.nodes()) {
    if (!(is_op(n, "MatMul") || is_op(n, "Gemm")) || busy(n)) continue;
    std::optional<ProductFusion> f = match_product(n, busy);
    if (!f) continue;
    taken.insert(taken.end(), f->nodes.begin(), f->nodes.end());
    out.push_back(std::move(*f));
  }
  return out;
}

const std::vector<CudaOpEntry>& matmul_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "MatMul", make_op<ProductOp>},
      {"", "Gemm", make_op<ProductOp>},
  };
  return ops;
}

}  // namespace amp::cuda
