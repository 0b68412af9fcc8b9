#include "backends/cuda/matmul_ops.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/strided_copy.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// fp32 products may use TF32 Tensor Cores when AMP_CUDA_TF32=1: 7x the fp32 rate on H100 for a
// 10-bit mantissa in the products (sums stay fp32), the trade PyTorch's allow_tf32 offers.
bool tf32_allowed() {
  const char* v = std::getenv("AMP_CUDA_TF32");
  return v && std::string(v) == "1";
}

// Operands: 0 A, 1 B, 2 C (Gemm, optional), 3 bias (BIAS epilogues). Results: 0 D, 1 bias gradient.
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
    g.tf32 = tf32_allowed();
    if (c_.gemm) {
      if (a.dims.size() != 2 || b.dims.size() != 2) throw InputError("Gemm takes 2-D A and B");
      g.trans_a = c_.trans_a;
      g.trans_b = c_.trans_b;
      g.m = c_.trans_a ? a.dims[1] : a.dims[0];
      g.k = c_.trans_a ? a.dims[0] : a.dims[1];
      g.n = c_.trans_b ? b.dims[0] : b.dims[1];
      if ((c_.trans_b ? b.dims[1] : b.dims[0]) != g.k) throw InputError("Gemm inner dims differ");
    } else {
      std::vector<int64_t> ad = a.dims, bd = b.dims;
      if (ad.size() == 1) ad.insert(ad.begin(), 1);
      if (bd.size() == 1) bd.push_back(1);
      if (ad.size() < 2 || bd.size() < 2) throw InputError("MatMul operands need a rank");
      g.m = ad[ad.size() - 2];
      g.k = ad.back();
      g.n = bd.back();
      if (bd[bd.size() - 2] != g.k) throw InputError("MatMul inner dims differ: " + std::to_string(g.k) + " vs " + std::to_string(bd[bd.size() - 2]));
      const int64_t batch_a = product(ad, 0, ad.size() - 2), batch_b = product(bd, 0, bd.size() - 2);
      std::vector<int64_t> pa(ad.begin(), ad.end() - 2), pb(bd.begin(), bd.end() - 2);
      while (pa.size() < pb.size()) pa.insert(pa.begin(), 1);
      while (pb.size() < pa.size()) pb.insert(pb.begin(), 1);
      if (batch_b == 1) {
        g.m *= batch_a;  // [batch, M, K] rows are one [batch*M, K] matrix
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
    auto plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms());
    const bool grad_epilogue = g.epilogue == GemmEpilogue::kBiasGradFromA || g.epilogue == GemmEpilogue::kBiasGradFromB;
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& buf, DeviceContext& c) {
          if (expand_c) strided_copy(c_copy, buf.in[2], buf.out[0], c.sm_count(), c.stream());
          void* bias = uses_bias_operand ? const_cast<void*>(buf.in[bias_operand]) : grad_epilogue ? buf.out[1] : nullptr;
          plan->enqueue(c.cublaslt(), c.stream(), buf.in[0], buf.in[1], buf.out[0], buf.out[0], bias, buf.workspace);
        },
        plan->workspace_bytes());
  }

 private:
  ProductConfig c_;
};

// ---- epilogue matching

const Node* only_reader(const Value* v) {
  if (!v || v->is_output() || v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

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

std::optional<int64_t> static_last_dim(const Value* v) {
  if (!v || !v->type().shape || v->type().shape->dims.empty()) return std::nullopt;
  return v->type().shape->dims.back().value;
}

bool is_product(const Node* n) {
  return n && n->domain().empty() && (n->op_type() == "MatMul" || (n->op_type() == "Gemm" && !n->input(2)));
}

// P = MatMul|Gemm(A, B) -> Add(P, bias[N]) [-> Relu]
std::optional<ProductFusion> match_bias(const Node* p, const std::function<bool(const Node*)>& excluded) {
  const Node* add = only_reader(p->output(0));
  if (!add || excluded(add) || add->op_type() != "Add" || !add->domain().empty()) return std::nullopt;
  const Value* bias = add->input(0) == p->output(0) ? add->input(1) : add->input(0);
  const auto n = static_last_dim(p->output(0));
  if (!bias || !n || !bias->type().shape || bias->type().shape->rank() != 1 || bias->type().shape->dims[0].value != n ||
      bias->dtype() != p->output(0)->dtype() || add->output(0)->dtype() != bias->dtype() || *n <= 1)
    return std::nullopt;
  if (p->op_type() == "MatMul" && (!p->input(1)->type().shape || p->input(1)->type().shape->rank() < 2)) return std::nullopt;
  ProductFusion f;
  ProductConfig c{p->op_type() == "Gemm", p->attr_int("transA", 0) != 0, p->attr_int("transB", 0) != 0,
                    p->attr_float("alpha", 1.0f), 1.0f, GemmEpilogue::kBias};
  f.nodes = {p, add};
  const Value* out = add->output(0);
  const Node* relu = only_reader(out);
  if (relu && !excluded(relu) && relu->op_type() == "Relu" && relu->domain().empty()) {
    c.epilogue = GemmEpilogue::kReluBias;
    f.nodes.push_back(relu);
    out = relu->output(0);
  }
  f.inputs = {p->input(0), p->input(1), nullptr, bias};
  f.outputs = {out};
  f.op = std::make_unique<ProductOp>(c);
  return f;
}

// dW = Gemm(dY, X, transA=1) or Gemm(X, dY, transA=1) beside db = ReduceSum(dY, axes [0]).
std::optional<ProductFusion> match_bias_grad(const Node* p, const std::function<bool(const Node*)>& excluded) {
  if (p->op_type() != "Gemm" || p->attr_int("transA", 0) == 0 || p->attr_float("alpha", 1.0f) != 1.0f) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Value* dy = p->input(static_cast<size_t>(side));
    if (!dy || !dy->type().shape || dy->type().shape->rank() != 2) continue;
    for (const Use& u : dy->uses()) {
      const Node* r = u.node;
      if (r == p || excluded(r) || r->op_type() != "ReduceSum" || !r->domain().empty() || r->attr_int("keepdims", 1) != 0 ||
          r->output(0)->dtype() != p->output(0)->dtype() || dy->dtype() != p->output(0)->dtype())
        continue;
      const auto axes = r->input(1) ? constant_ints(r->input(1)) : std::optional<std::vector<int64_t>>(r->attr_ints("axes"));
      if (!axes || *axes != std::vector<int64_t>{0}) continue;
      // dY is A: D = dY^T X, db = row sums of op(A) = dY^T. dY is B (transB=0): D = X^T dY, db = column sums of dY.
      if (side == 1 && p->attr_int("transB", 0) != 0) continue;
      ProductFusion f;
      f.nodes = {p, r};
      f.inputs = {p->input(0), p->input(1)};
      f.outputs = {p->output(0), r->output(0)};
      f.op = std::make_unique<ProductOp>(ProductConfig{true, true, p->attr_int("transB", 0) != 0, 1.0f, 1.0f,
                                                       side == 0 ? GemmEpilogue::kBiasGradFromA : GemmEpilogue::kBiasGradFromB});
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<ProductFusion> match_product_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<ProductFusion> out;
  std::vector<const Node*> taken;
  auto busy = [&](const Node* n) { return excluded(n) || std::find(taken.begin(), taken.end(), n) != taken.end(); };
  for (const Node* n : g.nodes()) {
    if (!is_product(n) || busy(n)) continue;
    std::optional<ProductFusion> f = match_bias(n, busy);
    if (!f) f = match_bias_grad(n, busy);
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
