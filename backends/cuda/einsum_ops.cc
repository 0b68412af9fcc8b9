// Einsum on the device as one cuBLASLt batched product (gemm.h), for the equations that are one:
// two operands, no letter repeated within a term, and every letter in at least two of the three
// terms — then each letter is a batch letter (both operands and the output), a row letter (the
// first operand and the output), a column letter (the second operand and the output) or a summed
// letter (both operands, not the output); or one operand whose letters the output only reorders,
// which is a copy. MaxViT's attention ("BGHID,BGHJD->BGHIJ" and
// "BGHIJ,BGHJD->BGHID") and the gradients autodiff makes of them
// (passes/autodiff/einsum_gradients.cc: "BGHIJ,BGHID->BGHJD", "BGHID,BGHIJ->BGHJD") all are. An
// operand whose letters are not [batch, rows, summed] or [batch, summed, rows] (a transpose
// cuBLASLt takes) is first copied into that order in the workspace (strided_copy.cuh), and an
// output not [batch, rows, columns] (or columns then rows: the operands swap) is written there and
// copied into place. fp32 accumulation as every product; the CPU kernel (backends/cpu/einsum.cc)
// sums the same products in fp32 too. Anything else — three operands, diagonals, a letter summed
// within one operand, size-1 broadcasting — is refused while the model is planned, with an error
// naming the node and the equation.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/gemm_tuning.h"
#include "backends/cuda/strided_copy.cuh"
#include "graph/error.h"
#include "graph/ops/einsum.h"

namespace amp::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool has(const std::string& term, char c) { return term.find(c) != std::string::npos; }

// The letters of `term` that `keep` accepts, in term's order.
template <class F>
std::string letters_of(const std::string& term, F keep) {
  std::string s;
  for (char c : term)
    if (keep(c)) s += c;
  return s;
}

class Einsum final : public CudaOp {
 public:
  Einsum(const Node& n, int64_t) : equation_(n.attr_string("equation", "")), e_(parse_einsum(equation_, n.inputs().size())) {
    auto refuse = [&](const std::string& why) {
      throw InputError("unsupported Einsum equation '" + equation_ + "' on the GPU: " + why +
                       " (it runs as one batched product: two operands, each letter in two of the three terms; or as a "
                       "transpose of one operand)");
    };
    if (e_.inputs.size() == 1) {
      // One operand: a permutation of its letters is a copy; anything summed or diagonal is not.
      const std::string& term = e_.inputs[0];
      for (char c : term)
        if (std::count(term.begin(), term.end(), c) > 1 || !has(e_.output, c))
          refuse("one operand ('" + term + "') that is not only transposed");
      permutation_ = true;
      return;
    }
    if (e_.inputs.size() != 2) refuse(std::to_string(e_.inputs.size()) + " operands");
    for (const std::string* term : {&e_.inputs[0], &e_.inputs[1], &e_.output})
      for (char c : *term)
        if (std::count(term->begin(), term->end(), c) > 1) refuse("letter '" + std::string(1, c) + "' repeats in '" + *term + "'");
    for (char c : e_.letters) {
      const int in = has(e_.inputs[0], c) + has(e_.inputs[1], c) + has(e_.output, c);
      if (in < 2) refuse("letter '" + std::string(1, c) + "' is summed within one operand");
    }
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    if (permutation_) return permute(s);
    const TensorDesc& x0 = *s.in[0];
    const TensorDesc& x1 = *s.in[1];
    const TensorDesc& y = *s.out[0];
    const DType t = y.dtype;
    if (x0.dtype != t || x1.dtype != t || (t != DType::kFloat && t != DType::kFloat16 && t != DType::kBFloat16))
      throw InputError("Einsum takes float, float16 or bfloat16 operands of one type on the GPU, not " +
                       std::string(dtype_name(x0.dtype)) + " and " + std::string(dtype_name(x1.dtype)));
    const std::vector<int64_t> extent = einsum_extents(e_, {x0.dims, x1.dims});
    auto extent_of = [&](char c) { return extent[e_.letters.find(c)]; };
    const std::vector<const TensorDesc*> xs = {&x0, &x1};
    for (size_t k = 0; k < 2; ++k)
      for (size_t i = 0; i < e_.inputs[k].size(); ++i)
        if (xs[k]->dims[i] != extent_of(e_.inputs[k][i]))
          throw InputError("unsupported Einsum equation '" + equation_ + "' on the GPU: operand " + std::to_string(k) +
                           " broadcasts letter '" + std::string(1, e_.inputs[k][i]) + "' from 1 to " +
                           std::to_string(extent_of(e_.inputs[k][i])));

    const std::string& out = e_.output;
    const std::string batch = letters_of(out, [&](char c) { return has(e_.inputs[0], c) && has(e_.inputs[1], c); });
    // Which operand is cuBLASLt's A: the one whose own letters come first in the output after the
    // batch letters (so the output is [batch, rows, columns] as written); the first when neither.
    auto own = [&](size_t k) { return letters_of(out, [&](char c) { return has(e_.inputs[k], c) && !has(e_.inputs[1 - k], c); }); };
    size_t ai = 0;
    if (out != batch + own(0) + own(1) && out == batch + own(1) + own(0)) ai = 1;
    const size_t bi = 1 - ai;
    const std::string rows = own(ai), cols = own(bi);
    const std::string summed = letters_of(e_.inputs[ai], [&](char c) { return !has(out, c); });
    const bool direct_out = out == batch + rows + cols;

    auto product = [&](const std::string& letters) {
      int64_t p = 1;
      for (char c : letters) p *= extent_of(c);
      return p;
    };
    GemmDesc g;
    g.m = product(rows);
    g.n = product(cols);
    g.k = product(summed);
    g.batch = product(batch);
    g.ab_type = g.d_type = t;
    g.tf32 = s.tf32;
    const size_t elem = dtype_size(t);

    // An operand's copy into `order` (its letters rearranged), contiguous, or none when its term
    // already is `order` or `transposed`.
    auto arrange = [&](size_t k, const std::string& order, const std::string& transposed, bool& trans,
                       StridedCopy& copy) -> bool {
      const std::string& term = e_.inputs[k];
      trans = false;
      if (term == order) return false;
      if (term == transposed) {
        trans = true;
        return false;
      }
      const std::vector<int64_t> src = contiguous_strides(xs[k]->dims);
      copy.elem_bytes = elem;
      for (char c : order) {
        copy.dims.push_back(extent_of(c));
        copy.src_strides.push_back(src[term.find(c)]);
      }
      copy.dst_strides = contiguous_strides(copy.dims);
      copy = simplify(copy);
      return true;
    };
    StridedCopy copy_a, copy_b, copy_out;
    const bool copies_a = arrange(ai, batch + rows + summed, batch + summed + rows, g.trans_a, copy_a);
    const std::string b_summed = summed;  // the same order as A's
    const bool copies_b = arrange(bi, batch + b_summed + cols, batch + cols + b_summed, g.trans_b, copy_b);
    if (!direct_out) {
      const std::string order = batch + rows + cols;
      std::vector<int64_t> dims;
      for (char c : order) dims.push_back(extent_of(c));
      const std::vector<int64_t> dst = contiguous_strides(y.dims);
      copy_out.elem_bytes = elem;
      copy_out.dims = dims;
      copy_out.src_strides = contiguous_strides(dims);
      for (char c : order) copy_out.dst_strides.push_back(dst[out.find(c)]);
      copy_out = simplify(copy_out);
    }
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;

    const size_t out_bytes = static_cast<size_t>(y.numel()) * elem;
    const bool empty = y.numel() == 0;
    const bool zeros = !empty && g.k == 0;  // nothing summed: the output is 0
    std::shared_ptr<GemmPlan> plan;
    size_t workspace = 0;
    if (!empty && !zeros) {
      plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
      tune_gemm(*plan, ctx);
      workspace = aligned(plan->workspace_bytes());
    }
    const size_t a_at = workspace;
    if (copies_a) workspace += aligned(static_cast<size_t>(g.batch * g.m * g.k) * elem);
    const size_t b_at = workspace;
    if (copies_b) workspace += aligned(static_cast<size_t>(g.batch * g.k * g.n) * elem);
    const size_t d_at = workspace;
    if (!direct_out) workspace += aligned(out_bytes);
    ctx.report().record("einsum", {{"equation", equation_}, {"product", g.str()}});
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& b, DeviceContext& c) {
          if (empty) return;
          if (zeros) {
            AMP_CUDA_CHECK(cudaMemsetAsync(b.out[0], 0, out_bytes, c.stream()));
            return;
          }
          auto* ws = static_cast<uint8_t*>(b.workspace);
          const void* a = b.in[ai];
          const void* bb = b.in[bi];
          if (copies_a) {
            strided_copy(copy_a, a, ws + a_at, c.sm_count(), c.stream());
            a = ws + a_at;
          }
          if (copies_b) {
            strided_copy(copy_b, bb, ws + b_at, c.sm_count(), c.stream());
            bb = ws + b_at;
          }
          void* d = direct_out ? b.out[0] : ws + d_at;
          plan->enqueue(c.cublaslt(), c.stream(), a, bb, d, d, nullptr, nullptr, b.workspace);
          if (!direct_out) strided_copy(copy_out, d, b.out[0], c.sm_count(), c.stream());
        },
        workspace);
  }

 private:
  // "abc->cab": the output's elements copied from the operand's (strided_copy.cuh), any type.
  std::unique_ptr<PreparedOp> permute(const OpShapes& s) const {
    const TensorDesc& x = *s.in[0];
    const TensorDesc& y = *s.out[0];
    const std::string& term = e_.inputs[0];
    if (x.dims.size() != term.size())
      throw InputError("Einsum term '" + term + "' has " + std::to_string(term.size()) + " letters for an operand of rank " +
                       std::to_string(x.dims.size()));
    const std::vector<int64_t> src = contiguous_strides(x.dims);
    StridedCopy copy;
    copy.elem_bytes = dtype_size(x.dtype);
    copy.dims = y.dims;
    copy.dst_strides = contiguous_strides(y.dims);
    for (char c : e_.output) copy.src_strides.push_back(src[term.find(c)]);
    const bool empty = y.numel() == 0;
    if (!empty && !copy.dims.empty()) copy = simplify(copy);
    return std::make_unique<PreparedFunction>([copy, empty](const OpBuffers& b, DeviceContext& c) {
      if (!empty) strided_copy(copy, b.in[0], b.out[0], c.sm_count(), c.stream());
    });
  }

  std::string equation_;
  EinsumEquation e_;
  bool permutation_ = false;
};

}  // namespace

const std::vector<CudaOpEntry>& einsum_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Einsum", make_op<Einsum>}};
  return ops;
}

}  // namespace amp::cuda
