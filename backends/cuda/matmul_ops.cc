#include "backends/cuda/env_flag.h"
#include "backends/cuda/matmul_ops.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fused_elementwise_op.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/gemm_tuning.h"
#include "backends/cuda/gemm_padding.h"
#include "backends/cuda/node_patterns.h"
#include "backends/cuda/reduce.cuh"
#include "backends/cuda/relu_mask.cuh"
#include "backends/cuda/strided_copy.cuh"
#include "backends/program.h"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// What an epilogue does with the bias operand or result.
bool reads_bias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kReluBias || e == GemmEpilogue::kReluAuxBias ||
         e == GemmEpilogue::kGeluBias || e == GemmEpilogue::kGeluAuxBias;
}
bool writes_bias_gradient(GemmEpilogue e) {
  return e == GemmEpilogue::kBiasGradFromA || e == GemmEpilogue::kBiasGradFromB || e == GemmEpilogue::kDReluBiasGrad ||
         e == GemmEpilogue::kDGeluBiasGrad;
}
// The backward epilogues that sum their own D into the bias gradient.
bool sums_own_result(GemmEpilogue e) { return e == GemmEpilogue::kDReluBiasGrad || e == GemmEpilogue::kDGeluBiasGrad; }
bool reads_gelu_input(GemmEpilogue e) { return e == GemmEpilogue::kDGelu || e == GemmEpilogue::kDGeluBiasGrad; }

// A product's epilogue, and what the unit runs after the product when it cannot have a better
// one — cuBLASLt offers no algorithm for it, the ReLU-mask probe found its mask unlike the graph's
// (relu_mask_probe.h), or the shapes do not fit it: the bias gradient as a separate sum, the ReLU
// mask written or applied by relu_mask.cu's kernels (the mask stays the bitmask either way, so a
// forward and a backward product need not agree on which of them gets its epilogue), the bias,
// ReLU, GELU or GELU's gradient as one generated elementwise kernel (rounding where the epilogue
// it stands in for rounds: product_type).
enum After : unsigned {
  kSum = 1,         // the bias gradient, summed by a ReducePlan
  kWriteMask = 2,   // write_relu_mask from the ReLU's result
  kApplyMask = 4,   // apply_relu_mask to the product, in place
  kAddBias = 8,     // the generated kernel adds the bias row
  kRelu = 16,       // ... then ReLU
  kGelu = 32,       // ... then GELU (tanh form)
  kGeluGrad = 64,   // ... the product times gelu'(GELU's input)
};
constexpr unsigned kGeneratedKernel = kAddBias | kRelu | kGelu | kGeluGrad;

struct EpilogueChoice {
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  unsigned after = 0;
  bool has(After a) const { return (after & a) != 0; }
};

// Best first; the last needs nothing of cuBLASLt but a plain product.
std::vector<EpilogueChoice> choices(GemmEpilogue e) {
  using E = GemmEpilogue;
  switch (e) {
    case E::kNone: return {{e}};
    case E::kBias: return {{e}, {E::kNone, kAddBias}};
    case E::kReluBias: return {{e}, {E::kBias, kRelu}, {E::kNone, kAddBias | kRelu}};
    case E::kBiasGradFromA:
    case E::kBiasGradFromB: return {{e}, {E::kNone, kSum}};
    case E::kReluAuxBias:
      return {{e}, {E::kReluBias, kWriteMask}, {E::kBias, kRelu | kWriteMask}, {E::kNone, kAddBias | kRelu | kWriteMask}};
    case E::kDRelu: return {{e}, {E::kNone, kApplyMask}};
    case E::kDReluBiasGrad: return {{e}, {E::kDRelu, kSum}, {E::kNone, kSum | kApplyMask}};
    case E::kGeluBias:
    case E::kGeluAuxBias: return {{e}, {E::kBias, kGelu}, {E::kNone, kAddBias | kGelu}};
    case E::kDGelu: return {{e}, {E::kNone, kGeluGrad}};
    case E::kDGeluBiasGrad: return {{e}, {E::kDGelu, kSum}, {E::kNone, kSum | kGeluGrad}};
  }
  throw Error("internal: unknown GemmEpilogue");
}

std::string after_names(unsigned after) {
  static const std::pair<After, const char*> kNames[] = {
      {kAddBias, "bias kernel"},        {kRelu, "ReLU kernel"},         {kGelu, "GELU kernel"},
      {kGeluGrad, "GELU-gradient kernel"}, {kWriteMask, "write_relu_mask"}, {kApplyMask, "apply_relu_mask"},
      {kSum, "separate bias-gradient sum"}};
  std::string out;
  for (const auto& [flag, name] : kNames)
    if (after & flag) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "nothing" : out;
}

// The type the product of a choice stores its result in, when a generated kernel reads it rather
// than the unit's result: fp32 where the kernel adds the bias or multiplies by gelu', so that the
// kernel rounds once, as the epilogue it stands in for does (and as Gemm with its C does); its
// result type where the product adds the bias itself and the kernel applies an activation to
// that, as the graph's next node does.
DType product_type(const EpilogueChoice& c, DType t) { return c.has(kAddBias) || c.has(kGeluGrad) ? DType::kFloat : t; }

// The generated kernel of a choice: reads the product (input 0, of product_type), the bias row
// (input 1, with kAddBias) and GELU's input (the last, with kGeluGrad); writes the activation (or
// the biased product), and with z_too the biased product as well, all of type t.
ElementwiseProgram kernel_after(const EpilogueChoice& c, DType t, bool z_too) {
  ElementwiseProgram p;
  auto input = [&](DType type) { return p.add_input(type); };
  auto op = [&](ElemOp o, std::vector<int> args) { return p.add_op(o, std::move(args), t); };
  const int product = input(product_type(c, t));
  const int z = c.has(kAddBias) ? op(ElemOp::kAdd, {product, input(t)}) : product;
  int y = z;
  if (c.has(kRelu)) y = op(ElemOp::kRelu, {z});
  if (c.has(kGelu)) y = op(ElemOp::kGeluTanh, {z});
  if (c.has(kGeluGrad)) y = op(ElemOp::kGeluTanhGrad, {product, input(t)});
  p.outputs = {y};
  if (z_too) p.outputs.push_back(z);
  p.check();
  return p;
}

constexpr size_t kScratchAlignment = 256;

// dst, d's rows stored `pitch` elements apart with zeros between (row_pitch.h), from src, the same
// rows one after the other.
void copy_into_rows(const void* src, void* dst, const TensorDesc& d, int64_t pitch, cudaStream_t stream) {
  if (d.dims.empty() || d.numel() == 0) return;
  const int64_t cols = d.dims.back(), rows = d.numel() / cols;
  const size_t elem = dtype_size(d.dtype), row = static_cast<size_t>(cols) * elem, padded = static_cast<size_t>(pitch) * elem;
  AMP_CUDA_CHECK(cudaMemcpy2DAsync(dst, padded, src, row, row, static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream));
  AMP_CUDA_CHECK(cudaMemset2DAsync(static_cast<uint8_t*>(dst) + row, padded, 0, padded - row, static_cast<size_t>(rows), stream));
}

// Operands: 0 A, 1 B, 2 C (Gemm, optional), 3 bias (BIAS epilogues), 4 the tensor a bias gradient
// sums (BGRAD epilogues), 5 the aux matrix a backward epilogue reads: the ReLU mask DRELU applies,
// GELU's input DGELU differentiates at. Results: 0 D, 1 bias gradient, 2 the aux matrix a forward
// epilogue writes: the ReLU mask (RELU_AUX_BIAS), GELU's input (GELU_AUX_BIAS). The mask is
// cuBLASLt's bitmask (gemm.h), never a bool tensor; GELU's input is a tensor of its type.
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

  // The product of these shapes as cuBLASLt is asked for it (the epilogue the one wanted), and
  // how C is expanded into D first where it is not the bias row.
  struct Described {
    GemmDesc g;
    bool expand_c = false;
    StridedCopy c_copy;
  };
  Described describe(const OpShapes& s) const {
    const TensorDesc& a = *s.in.at(0);
    const TensorDesc& b = *s.in.at(1);
    const TensorDesc& d = *s.out.at(0);
    if (a.dtype != b.dtype) throw InputError("operands are " + std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)));
    Described out;
    GemmDesc& g = out.g;
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
    bool& expand_c = out.expand_c;
    StridedCopy& c_copy = out.c_copy;
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
        const std::vector<int64_t> dims = {g.m, g.n};
        c_copy.dims = dims;
        c_copy.dst_strides = contiguous_strides(dims);
        c_copy.src_strides = {cd[0] == 1 ? 0 : cd[1], cd[1] == 1 ? 0 : 1};
        c_copy.elem_bytes = dtype_size(c.dtype);
        c_copy = simplify(c_copy);
      }
    }
    // Operands the plan stores with padded rows (row_pitch.h) are read and written where they are.
    g.a_stored_padded = a.row_pitch != 0;
    g.b_stored_padded = b.row_pitch != 0;
    g.d_stored_padded = d.row_pitch != 0;
    return out;
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& a = *s.in.at(0);
    const TensorDesc& b = *s.in.at(1);
    const TensorDesc& d = *s.out.at(0);
    Described described = describe(s);
    GemmDesc& g = described.g;
    const bool expand_c = described.expand_c;
    const StridedCopy c_copy = described.c_copy;
    const size_t bias_operand = s.has_in(3) ? 3 : 2;  // fused Add's bias, or Gemm's own C row
    // The ReLU mask covers D's rows, [rows, n], as cuBLASLt's bitmask: the masked gradient must be
    // the forward's ReLU result in dims, or bits would belong to other elements.
    const int64_t rows = g.m * g.batch, mask_ld = gemm_aux_ld(GemmEpilogue::kDRelu, g.n);
    if (gemm_aux_ld(g.epilogue, g.n) && d.numel() != rows * g.n)
      throw InputError("the result " + type_str(d.dtype, d.dims) + " is not the product's [" + std::to_string(rows) +
                       "x" + std::to_string(g.n) + "]");
    if (s.has_in(5) && s.in[5]->dims != d.dims)
      throw InputError("the aux matrix (ReLU mask or GELU input) is " + type_str(s.in[5]->dtype, s.in[5]->dims) +
                       " but the gradient it applies to " + type_str(d.dtype, d.dims));
    // A bias gradient is ReduceSum(T, every axis but the last). The BGRADA/B epilogues' sum over
    // the dY operand equals it when that operand is T's rows: as many elements, T's last dim its
    // length. The matcher sees that from the graph for most, not all, shapes; else the product
    // runs without it and the sum on its own. DRELU_BGRAD sums its own D, which is T (one batch:
    // cuBLASLt keeps a bias gradient per batch).
    bool sums_mismatch = false;
    if (writes_bias_gradient(g.epilogue)) {
      if (!s.has_out(1)) throw InputError("a bias-gradient product needs the summed tensor");
      const bool own = sums_own_result(g.epilogue);
      if (!own && !s.has_in(4)) throw InputError("a bias-gradient product needs the summed tensor");
      const TensorDesc& summed = own ? d : *s.in[4];
      const bool from_a = g.epilogue == GemmEpilogue::kBiasGradFromA;
      const int64_t length = from_a ? g.m : g.n;
      const int64_t operand = own ? d.numel() : (from_a ? a : b).numel();
      sums_mismatch = summed.dims.empty() || summed.numel() != operand || summed.dims.back() != length ||
                      s.out[1]->numel() != length || g.batch != 1;
    }
    // What rules out an epilogue before cuBLASLt is asked, and why each was not taken, in words
    // for the device report.
    std::vector<std::string> refused;
    auto ruled_out = [&](GemmEpilogue e) -> std::string {
      if (sums_mismatch && writes_bias_gradient(e)) return "the summed tensor is not the product's rows";
      // GELU's input is a tensor other units read as its type: cuBLASLt may write or read it as
      // the aux matrix only when its rows need no padding (AUX_LD, a multiple of 8, equal to n).
      if ((e == GemmEpilogue::kGeluAuxBias || reads_gelu_input(e)) && gemm_aux_ld(e, g.n) != g.n)
        return "GELU's input rows would be padded to " + std::to_string(gemm_aux_ld(e, g.n));
      if (e == GemmEpilogue::kReluAuxBias && !ctx.relu_mask_convention(d.dtype).writer_matches())
        return ctx.relu_mask_convention(d.dtype).detail;
      if ((e == GemmEpilogue::kDRelu || e == GemmEpilogue::kDReluBiasGrad) &&
          !ctx.relu_mask_convention(d.dtype).reader_matches())
        return ctx.relu_mask_convention(d.dtype).detail;
      return "";
    };
    const GemmEpilogue wanted = g.epilogue;
    const std::vector<EpilogueChoice> options = choices(wanted);
    std::shared_ptr<GemmPlan> plan;
    EpilogueChoice chosen;
    for (size_t k = 0; !plan; ++k) {
      if (k == options.size()) {
        std::string why;
        for (const std::string& r : refused) why += (why.empty() ? "" : "; ") + r;
        throw NoGemmAlgorithm("no way to run a " + g.str() + ": " + why);
      }
      chosen = options[k];
      g.epilogue = chosen.epilogue;
      g.d_type = product_type(chosen, d.dtype);
      // A generated kernel after the product reads it from scratch, stored as its dims.
      g.d_stored_padded = d.row_pitch && !(chosen.after & kGeneratedKernel);
      if (const std::string why = ruled_out(chosen.epilogue); !why.empty()) {
        refused.push_back(std::string(gemm_epilogue_name(chosen.epilogue)) + ": " + why);
        continue;
      }
      try {
        plan = std::make_shared<GemmPlan>(g, ctx.cublaslt(), ctx.gemm_algorithms(), &ctx.report());
        tune_gemm(*plan, ctx);
      } catch (const NoGemmAlgorithm& e) {
        // cuBLASLt offers its epilogues for fewer types and shapes than plain products: the same
        // unit then runs the product with less of its work in the epilogue.
        refused.push_back(e.what());
      }
    }
    std::shared_ptr<ReducePlan> separate_sum;
    // A summed tensor stored with padded rows is summed as [rows, pitch] (zeros in the padding)
    // into scratch, whose first elements are the bias gradient.
    int64_t summed_pitch = 0;
    size_t pitched_sum_at = 0, pitched_sum_bytes = 0;
    if (chosen.has(kSum)) {
      const TensorDesc& summed = s.has_in(4) ? *s.in[4] : d;
      std::vector<int64_t> dims = summed.dims;
      if (summed.row_pitch && !dims.empty() && dims.back() > 0) {
        summed_pitch = summed.row_pitch;
        dims = {summed.numel() / dims.back(), summed_pitch};
        pitched_sum_bytes = static_cast<size_t>(dims.back()) * dtype_size(s.out[1]->dtype);
      }
      std::vector<bool> reduced(dims.size(), true);
      if (!reduced.empty()) reduced.back() = false;
      separate_sum = std::make_shared<ReducePlan>(summed.dtype, dims, reduced, ReduceKind::kSum, ctx.sm_count());
    }
    const GemmEpilogue epilogue = g.epilogue;
    const bool sums_d = !s.has_in(4);
    const DType d_type = d.dtype;
    // The generated kernel after the product never reads the buffer it writes (its operands are
    // __restrict__): the product writes into scratch past cuBLASLt's workspace, or — a product
    // with the bias whose unit also returns GELU's input — into that result, which the kernel reads.
    std::shared_ptr<PreparedOp> kernel;
    const bool writes_z = wanted == GemmEpilogue::kGeluAuxBias;  // result 2: GELU's input
    const bool z_by_product = writes_z && chosen.epilogue == GemmEpilogue::kBias;
    const bool z_by_kernel = writes_z && chosen.has(kAddBias);
    size_t scratch_at = 0, workspace = plan->workspace_bytes();
    auto aligned = [](size_t bytes) { return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment; };
    const TensorDesc product_desc{g.d_type, d.dims};
    // A result stored with padded rows that the generated kernel computes: the kernel writes its
    // rows one after the other into scratch, and they are copied out into the padded rows.
    const TensorDesc dense_d{d.dtype, d.dims};
    const int64_t d_pitch = d.row_pitch;
    size_t dense_at = 0;
    if (chosen.after & kGeneratedKernel) {
      OpShapes shapes;
      shapes.in.push_back(&product_desc);
      if (chosen.has(kAddBias)) shapes.in.push_back(s.in[bias_operand]);
      if (chosen.has(kGeluGrad)) shapes.in.push_back(s.in[5]);
      shapes.host.assign(shapes.in.size(), nullptr);
      shapes.out = {&dense_d};
      if (z_by_kernel) shapes.out.push_back(&dense_d);
      if (d_pitch && z_by_kernel) throw Error("internal: a product's padded result beside GELU's input");
      kernel = FusedElementwiseOp(kernel_after(chosen, d.dtype, z_by_kernel)).prepare(shapes, ctx);
      if (!z_by_product) {
        scratch_at = aligned(workspace);
        workspace = scratch_at + product_desc.nbytes();
      }
      if (d_pitch) {
        dense_at = aligned(workspace);
        workspace = dense_at + dense_d.nbytes();
      }
    }
    if (separate_sum) {
      pitched_sum_at = aligned(separate_sum->workspace_bytes());
      workspace = std::max(workspace, pitched_sum_bytes ? pitched_sum_at + pitched_sum_bytes : separate_sum->workspace_bytes());
    }
    const bool scratch = kernel && !z_by_product;
    const size_t s_out1_bytes = s.has_out(1) ? s.out[1]->nbytes() : 0;
    ctx.report().record("product", {{"product", g.str()},
                                    {"wanted", gemm_epilogue_name(wanted)},
                                    {"chosen", gemm_epilogue_name(chosen.epilogue)},
                                    {"after", after_names(chosen.after)},
                                    {"refused", [&] {
                                       std::string all;
                                       for (const std::string& r : refused) all += (all.empty() ? "" : "; ") + r;
                                       return all;
                                     }()},
                                    {"algorithms", std::to_string(plan->algorithm_count())}});
    return std::make_unique<PreparedFunction>(
        [=](const OpBuffers& buf, DeviceContext& c) {
          if (expand_c) strided_copy(c_copy, buf.in[2], buf.out[0], c.sm_count(), c.stream());
          void* bias = reads_bias(epilogue)             ? const_cast<void*>(buf.in[bias_operand])
                       : writes_bias_gradient(epilogue) ? buf.out[1]
                                                        : nullptr;
          // The aux matrix: the forward epilogues write it as the unit's result 2, the backward
          // ones read it as operand 5.
          const bool writes_aux = epilogue == GemmEpilogue::kReluAuxBias || epilogue == GemmEpilogue::kGeluAuxBias;
          void* aux = !gemm_aux_ld(epilogue, g.n) ? nullptr : writes_aux ? buf.out[2] : const_cast<void*>(buf.in[5]);
          void* product_out = scratch ? static_cast<uint8_t*>(buf.workspace) + scratch_at
                              : z_by_product ? buf.out[2]
                                             : buf.out[0];
          plan->enqueue(c.cublaslt(), c.stream(), buf.in[0], buf.in[1], product_out, product_out, bias, aux,
                        buf.workspace);
          if (kernel) {
            void* kernel_out = d_pitch ? static_cast<uint8_t*>(buf.workspace) + dense_at : buf.out[0];
            OpBuffers k{{product_out}, {kernel_out}};
            if (chosen.has(kAddBias)) k.in.push_back(buf.in[bias_operand]);
            if (chosen.has(kGeluGrad)) k.in.push_back(buf.in[5]);
            if (z_by_kernel) k.out.push_back(buf.out[2]);
            kernel->enqueue(k, c);
            if (d_pitch) copy_into_rows(kernel_out, buf.out[0], dense_d, d_pitch, c.stream());
          }
          if (chosen.has(kWriteMask)) write_relu_mask(d_type, buf.out[0], buf.out[2], rows, g.n, mask_ld, c.sm_count(), c.stream());
          if (chosen.has(kApplyMask)) apply_relu_mask(d_type, buf.out[0], buf.in[5], rows, g.n, mask_ld, c.sm_count(), c.stream());
          if (separate_sum && summed_pitch) {
            uint8_t* sums = static_cast<uint8_t*>(buf.workspace) + pitched_sum_at;
            separate_sum->enqueue(sums_d ? buf.out[0] : buf.in[4], sums, buf.workspace, c.stream());
            AMP_CUDA_CHECK(cudaMemcpyAsync(buf.out[1], sums, s_out1_bytes, cudaMemcpyDeviceToDevice, c.stream()));
          } else if (separate_sum) {
            separate_sum->enqueue(sums_d ? buf.out[0] : buf.in[4], buf.out[1], buf.workspace, c.stream());
          }
        },
        workspace);
  }

  size_t packed_output_bytes(const OpShapes& s, size_t output) const override {
    return output == 2 && c_.epilogue == GemmEpilogue::kReluAuxBias ? mask_bytes(*s.out.at(0)) : 0;
  }

  // Padded rows (row_pitch.h): A, B and D where the padded product (gemm_padding.h) widens their
  // rows to the pitch without adding rows, so that it reads or writes them where they are; and
  // the tensor a bias gradient sums, which the epilogue takes from A or B (a separate sum, where
  // cuBLASLt refuses the epilogue, sums its padded rows). Only for the epilogues that pad.
  bool takes_row_pitch(const OpShapes& s, bool output, size_t operand) const override {
    using E = GemmEpilogue;
    const E e = c_.epilogue;
    const bool bias_grad = e == E::kBiasGradFromA || e == E::kBiasGradFromB;
    if (!(e == E::kNone || e == E::kBias || bias_grad)) return false;
    if (output ? operand != 0 : !(operand <= 1 || (operand == 4 && bias_grad))) return false;
    const TensorDesc* t = output ? (s.has_out(0) ? s.out[0] : nullptr) : (s.has_in(operand) ? s.in[operand] : nullptr);
    if (!t || !t->row_pitch || !s.has_in(0) || !s.has_in(1) || !s.has_out(0)) return false;
    Described described;
    try {
      described = describe(s);
    } catch (const Error&) {
      return false;
    }
    if (described.expand_c) return false;
    if (!output && operand == 4) return true;
    return GemmPadding::takes_pitch(described.g, output ? 2 : static_cast<int>(operand), t->row_pitch);
  }
  size_t packed_input_bytes(const OpShapes& s, size_t input) const override {
    const bool drelu = c_.epilogue == GemmEpilogue::kDRelu || c_.epilogue == GemmEpilogue::kDReluBiasGrad;
    return input == 5 && drelu ? mask_bytes(*s.out.at(0)) : 0;
  }

 private:
  // The bitmask of D's rows: the same bytes for the forward product that writes it and the
  // backward one that reads it, both computed from their own D.
  static size_t mask_bytes(const TensorDesc& d) {
    if (d.dims.empty() || d.numel() == 0) return 0;
    return gemm_aux_bytes(GemmEpilogue::kDRelu, d.dtype, d.numel() / d.dims.back(), d.dims.back());
  }

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

// A ReduceSum (keepdims 0, of type t) of `summed`, a tensor of the given rank, over every axis but
// the last: the bias gradient of the layer whose output gradient `summed` is.
const Node* sum_over_rows(const Value* summed, size_t rank, DType t, const std::function<bool(const Node*)>& busy) {
  for (const Use& u : summed->uses()) {
    const Node* r = u.node;
    if (!is_op(r, "ReduceSum") || busy(r) || r->attr_int("keepdims", 1) != 0 || r->output(0)->dtype() != t) continue;
    auto axes = r->input(1) ? constant_ints(r->input(1)) : std::optional<std::vector<int64_t>>(r->attr_ints("axes"));
    if (!axes) continue;
    for (int64_t& axis : *axes)
      if (axis < 0) axis += static_cast<int64_t>(rank);
    std::sort(axes->begin(), axes->end());
    std::vector<int64_t> leading(rank - 1);
    std::iota(leading.begin(), leading.end(), int64_t{0});
    if (*axes == leading) return r;
  }
  return nullptr;
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
    if (const Node* r = sum_over_rows(summed, *rank, t, busy)) return std::make_pair(r, summed);
  }
  return std::nullopt;
}

// The rank of a product's result when the graph fixes it: 2 for Gemm, numpy's for MatMul of
// operands of rank 2 or more.
std::optional<size_t> product_rank(const Node* p) {
  if (p->op_type() == "Gemm") return 2;
  const std::optional<size_t> a = static_rank(p->input(0)), b = static_rank(p->input(1));
  if (!a || !b || *a < 2 || *b < 2) return std::nullopt;
  return std::max(*a, *b);
}

// A product that can take a ReLU's backward into a DRELU epilogue: MatMul, or Gemm without C.
bool drelu_product(const Node* p) { return is_op(p, "MatMul") || (is_op(p, "Gemm") && !p->input(2)); }

// The ReLU's gradient rule reads its result y as mask = Greater(y, 0), dX = Where(mask, dY, 0).
// When every reader of the mask is such a Where whose dY is the only result of a product still to
// be matched (`pending`) — dY = dZ W^T, the product of the next layer's backward — the forward
// product can write the mask as cuBLASLt's bitmask (RELU_AUX_BIAS) and each of those products
// apply it (DRELU): no unit reads the mask as bool, so it need not exist as one. Returns the
// Greater and the Wheres; nothing when another node reads the mask, or it is a graph output.
std::optional<std::pair<const Node*, std::vector<const Node*>>> relu_mask_readers(
    const Value* y, const std::function<bool(const Node*)>& busy, const std::function<bool(const Node*)>& pending) {
  auto may_match = [](const Value* a, const Value* b) {  // in dims, as far as the graph says
    if (!a->type().shape || !b->type().shape) return true;
    const std::vector<Dim>& da = a->type().shape->dims;
    const std::vector<Dim>& db = b->type().shape->dims;
    if (da.size() != db.size()) return false;
    for (size_t i = 0; i < da.size(); ++i)
      if (da[i].value && db[i].value && *da[i].value != *db[i].value) return false;
    return true;
  };
  for (const Use& u : y->uses()) {
    const Node* greater = u.node;
    if (!is_op(greater, "Greater") || busy(greater) || greater->input(0) != y || !is_zero_constant(greater->input(1)))
      continue;
    const Value* mask = greater->output(0);
    if (mask->is_output() || mask->uses().empty()) continue;
    std::vector<const Node*> wheres;
    for (const Use& m : mask->uses()) {
      const Node* where = m.node;
      if (!is_op(where, "Where") || busy(where) || m.index != 0 || where->input(1) == mask ||
          !is_zero_constant(where->input(2)))
        break;
      const Value* dy = where->input(1);
      const Node* p = dy->producer();
      if (!drelu_product(p) || busy(p) || !pending(p) || only_reader(dy) != where || dy->dtype() != y->dtype() ||
          where->output(0)->dtype() != y->dtype() || !may_match(dy, y))
        break;
      wheres.push_back(where);
    }
    if (wheres.size() == mask->uses().size()) return std::make_pair(greater, wheres);
  }
  return std::nullopt;
}

bool is_tanh_gelu(const Node* n, const char* op) {
  return n && n->domain() == kAmpDomain && n->op_type() == op && n->attr_string("approximate", "none") == "tanh";
}

// z, a product's result plus its bias, read by one ai.onnx_amp Gelu of the tanh form — the GELU
// cuBLASLt's epilogues compute (their exact-erf GELU is no epilogue: the exported erf form stays a
// generated kernel, fusion must not change results). Returns the Gelu, and the GeluGrads of its
// backward that read z and whose dY is the only result of a product still to be matched: each of
// those products can take its GeluGrad as a DGELU epilogue reading z, which the forward product
// writes as its aux matrix (GELU_AUX_BIAS). Other readers of z are fine: z is stored as its type.
std::optional<std::pair<const Node*, std::vector<const Node*>>> gelu_of(const Value* z, DType t,
                                                                        const std::function<bool(const Node*)>& busy,
                                                                        const std::function<bool(const Node*)>& pending) {
  const Node* gelu = nullptr;
  std::vector<const Node*> grads;
  for (const Use& u : z->uses()) {
    const Node* n = u.node;
    if (is_tanh_gelu(n, "Gelu") && u.index == 0 && !busy(n) && n->output(0)->dtype() == t) {
      if (gelu) return std::nullopt;  // two GELUs of one z: neither is the product's
      gelu = n;
    } else if (is_tanh_gelu(n, "GeluGrad") && u.index == 1 && n->input(0) != z && !busy(n)) {
      const Value* dy = n->input(0);
      const Node* p = dy->producer();
      if (drelu_product(p) && !busy(p) && pending(p) && only_reader(dy) == n && dy->dtype() == t &&
          n->output(0)->dtype() == t)
        grads.push_back(n);
    }
  }
  if (!gelu) return std::nullopt;
  return std::make_pair(gelu, grads);
}

// masked: the Wheres of ReLU backwards whose masks earlier forward products keep as bitmasks, and
// the GeluGrads whose inputs they write as aux matrices, each to be absorbed by the product it
// reads (relu_mask_readers, gelu_of); grows with this product's.
// Whether the backward product of a GELU takes its bias gradient's sum (DGELU_BGRAD,
// AMP_CUDA_DGELU_BGRAD=1), or leaves it to the weight gradient's product (BGRADA/B; a sum of its
// own where that product takes no epilogue), the default: on an H200 (2026-11-28, cuBLASLt 13.1)
// DGELU_BGRAD summed GPT-2-small's [8192 x 3072] dH in a kernel of its own taking 160 us a call
// (12 a step: 1.9 of its 25 ms), where the BGRADA sums of its other 36 layers' products took 22 us
// each on average.
bool dgelu_bias_grad() {
  return env_flag("AMP_CUDA_DGELU_BGRAD");
}

std::optional<ProductFusion> match_product(const Node* p, const std::function<bool(const Node*)>& busy,
                                           const std::function<bool(const Node*)>& pending,
                                           std::vector<const Node*>& masked) {
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
  const Value* mask_written = nullptr;  // or GELU's input
  if (bias) {
    c.epilogue = GemmEpilogue::kBias;
    const Node* relu = only_reader(out);
    if (auto gelu = gelu_of(out, t, busy, pending)) {
      // z has other readers than the Gelu (its backward's GeluGrads at least, in training): it is
      // the aux matrix GELU_AUX_BIAS writes beside gelu(z).
      const bool keep_z = gelu->first != only_reader(out);
      c.epilogue = keep_z ? GemmEpilogue::kGeluAuxBias : GemmEpilogue::kGeluBias;
      f.nodes.push_back(gelu->first);
      if (keep_z) mask_written = out;
      out = gelu->first->output(0);
      masked.insert(masked.end(), gelu->second.begin(), gelu->second.end());
    } else if (is_op(relu, "Relu") && !busy(relu)) {
      c.epilogue = GemmEpilogue::kReluBias;
      f.nodes.push_back(relu);
      out = relu->output(0);
      if (auto readers = relu_mask_readers(out, busy, pending)) {
        c.epilogue = GemmEpilogue::kReluAuxBias;
        f.nodes.push_back(readers->first);
        mask_written = readers->first->output(0);
        masked.insert(masked.end(), readers->second.begin(), readers->second.end());
      }
    }
  }
  f.outputs = {out};

  // The backward of such a ReLU: Where(mask, this product, 0) is its DRELU epilogue. The bias
  // gradient summed from the result is DRELU_BGRAD's rather than BGRADA/B's on the weight
  // gradient's product (either saves the separate sum): it is the pair cuBLASLt made for
  // RELU_AUX_BIAS, the weight gradient is left a plain product, which cuBLASLt has the most
  // algorithms for (BGRADA/B fix how one operand may be transposed), and the sum is of the fp32
  // values before D is rounded to its type — more exact than the graph's sum of the rounded dH,
  // and not bit-equal to it in fp16/bf16 (half an ulp of each term at most).
  // Likewise GeluGrad(this product, z) is its DGELU epilogue; the bias gradient DGELU_BGRAD's only
  // where dgelu_bias_grad() asks for it (measured slower).
  const Value* mask_read = nullptr;  // or GELU's input
  const Node* where = only_reader(out);
  if (where && std::find(masked.begin(), masked.end(), where) != masked.end()) {
    const bool gelu = is_tanh_gelu(where, "GeluGrad");
    c.epilogue = gelu ? GemmEpilogue::kDGelu : GemmEpilogue::kDRelu;
    f.nodes.push_back(where);
    mask_read = gelu ? where->input(1) : where->input(0);
    out = where->output(0);
    f.outputs = {out};
    const std::optional<size_t> rank = product_rank(p);
    const Node* sum = rank && (!gelu || dgelu_bias_grad()) ? sum_over_rows(out, *rank, t, busy) : nullptr;
    if (sum) {
      c.epilogue = gelu ? GemmEpilogue::kDGeluBiasGrad : GemmEpilogue::kDReluBiasGrad;
      f.nodes.push_back(sum);
      f.outputs.push_back(sum->output(0));
    }
  }

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
  f.inputs = {a, b, c_input, bias, summed, mask_read};
  if (mask_written) f.outputs = {out, nullptr, mask_written};
  f.op = std::make_unique<ProductOp>(c);
  return f;
}

}  // namespace

std::vector<ProductFusion> match_product_epilogues(const Graph& g, const std::function<bool(const Node*)>& excluded) {
  std::vector<ProductFusion> out;
  std::vector<const Node*> taken;
  std::vector<const Node*> masked;
  std::unordered_set<const Node*> visited;
  auto busy = [&](const Node* n) { return excluded(n) || std::find(taken.begin(), taken.end(), n) != taken.end(); };
  auto pending = [&](const Node* n) { return !visited.count(n); };
  for (const Node* n : g.nodes()) {
    if (!(is_op(n, "MatMul") || is_op(n, "Gemm")) || busy(n)) continue;
    visited.insert(n);
    std::optional<ProductFusion> f = match_product(n, busy, pending, masked);
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
