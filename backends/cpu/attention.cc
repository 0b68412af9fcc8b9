// ai.onnx_amp Attention and AttentionGrad (graph/amp_ops.h): scaled dot-product attention by
// blocks of 64 queries x 64 keys, never the whole T x T. The forward keeps each query row's
// running maximum and sum (the online softmax) and rescales its output accumulator as later key
// blocks raise the maximum; it saves the row's log-sum-exp. The backward (FlashAttention's)
// recomputes each block's probabilities P = exp(S - LSE) from it: one pass over key blocks sums
// dK and dV, one over query blocks sums dQ (and a float mask's gradient), so no two threads
// write one row. What it holds besides its inputs and outputs: fp32 copies of 16-bit Q, K, V
// and dY, a float per row, and per thread a few 64 x 64 tiles.
//
// As a GPU's fused attention computes it: the products through sgemm in fp32 (16-bit inputs
// widened exactly, fp32 accumulation), the softmax in fp32, the probabilities and dS rounded to
// the 16-bit type before the products that read them (the tensor-core operands), every output
// rounded once. fp64 runs in fp64.
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/fast_math.h"

namespace amp::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 64;

// One call's extents and where its mask's elements are.
struct Geometry {
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  std::vector<int64_t> mask_offset;  // per batch index: its [Tq, Tk] slice of the mask
  int64_t mask_row = 0, mask_col = 0;  // strides along queries and keys, 0 where broadcast
};

Geometry geometry(const View& q, const View& k, const View& v, const View* mask, const char* op) {
  const size_t r = q.rank();
  auto refuse = [&](const std::string& why) {
    return InputError(std::string(op) + ": " + why + " (Q " + dims_str(q.dims) + ", K " + dims_str(k.dims) + ", V " +
                      dims_str(v.dims) + (mask ? ", mask " + dims_str(mask->dims) : std::string()) + ")");
  };
  if (r < 2 || k.rank() != r || v.rank() != r) throw refuse("Q, K and V must have one rank >= 2");
  for (size_t i = 0; i + 2 < r; ++i)
    if (k.dims[i] != q.dims[i] || v.dims[i] != q.dims[i]) throw refuse("Q, K and V must have equal leading dims");
  Geometry g;
  g.batch = product(q.dims, 0, r - 2);
  g.tq = q.dims[r - 2];
  g.d = q.dims[r - 1];
  g.tk = k.dims[r - 2];
  g.dv = v.dims[r - 1];
  if (k.dims[r - 1] != g.d || v.dims[r - 2] != g.tk) throw refuse("K must be [..., Tk, d] and V [..., Tk, dv]");
  if (!mask) return g;
  const size_t mr = mask->rank();
  if (mr > r) throw refuse("the mask's rank exceeds the scores'");
  std::vector<int64_t> scores = q.dims;
  scores[r - 1] = g.tk;
  std::vector<int64_t> stride(r, 0);  // per scores axis, the mask's stride (0: broadcast)
  int64_t s = 1;
  for (size_t i = 0; i < mr; ++i) {
    const size_t m = mr - 1 - i, a = r - 1 - i;
    if (mask->dims[m] != 1 && mask->dims[m] != scores[a]) throw refuse("the mask does not broadcast to the scores");
    if (mask->dims[m] != 1) stride[a] = s;
    s *= mask->dims[m];
  }
  g.mask_row = stride[r - 2];
  g.mask_col = stride[r - 1];
  g.mask_offset.assign(static_cast<size_t>(g.batch), 0);
  for (int64_t b = 0; b < g.batch; ++b) {
    int64_t rest = b, off = 0;
    for (size_t a = r - 2; a-- > 0;) {
      off += (rest % scores[a]) * stride[a];
      rest /= scores[a];
    }
    g.mask_offset[static_cast<size_t>(b)] = off;
  }
  return g;
}

// What the mask adds to a score: 0 or -inf for a bool one (true: the key takes part), else its value.
template <class C>
C mask_term(const View& m, int64_t at) {
  switch (m.dtype) {
    case DType::kBool: return m.as<bool>()[at] ? C(0) : -std::numeric_limits<C>::infinity();
    case DType::kFloat: return static_cast<C>(m.as<float>()[at]);
    case DType::kFloat16: return static_cast<C>(load(m.as<f16>()[at]));
    case DType::kBFloat16: return static_cast<C>(load(m.as<bf16>()[at]));
    case DType::kDouble: return static_cast<C>(m.as<double>()[at]);
    default: throw InputError("Attention's attn_mask must be bool or floating");
  }
}

// x as the T operand of a tensor-core product holds it.
template <class T, class C>
C as_operand(C x) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return load(store<T>(x));
  else return x;
}

template <class T>
constexpr bool kWidened = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// The compute type's copy of a tensor: its own data, or an fp32 copy placed at `scratch`.
template <class T>
const compute_t<T>* computed(const View& v, compute_t<T>*& scratch, int threads) {
  if constexpr (kWidened<T>) {
    float* out = scratch;
    widen(v.as<T>(), out, v.numel(), threads);
    scratch += v.numel();
    return out;
  } else {
    return v.as<T>();
  }
}

// The scores of queries [q0, q0 + rows) against keys [k0, k0 + cols) of batch b: scale Q K^T
// plus the mask, -inf where hidden; into s (rows x cols).
template <class C>
void block_scores(const Geometry& g, const View* mask, bool causal, C scale, const C* q, const C* k, int64_t b,
                  int64_t q0, int64_t rows, int64_t k0, int64_t cols, C* s) {
  gemm(false, true, rows, cols, g.d, scale, q + (b * g.tq + q0) * g.d, g.d, k + (b * g.tk + k0) * g.d, g.d, C(0), s,
       cols);
  const C hidden = -std::numeric_limits<C>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    C* row = s + i * cols;
    if (mask) {
      const int64_t base = g.mask_offset[static_cast<size_t>(b)] + (q0 + i) * g.mask_row + k0 * g.mask_col;
      for (int64_t j = 0; j < cols; ++j) row[j] += mask_term<C>(*mask, base + j * g.mask_col);
    }
    if (causal)
      for (int64_t j = std::max<int64_t>(0, q0 + i + 1 - k0); j < cols; ++j) row[j] = hidden;
  }
}

// Keys a query block [q0, q0 + rows) can see: all, or with is_causal those up to its last query.
int64_t keys_seen(const Geometry& g, bool causal, int64_t q0, int64_t rows) {
  return causal ? std::min(g.tk, q0 + rows) : g.tk;
}

// The node's scale attribute; absent, ONNX's default 1/sqrt(d), known once d is.
std::optional<float> scale_attribute(const Node& n) {
  return n.attr("scale") ? std::optional<float>(n.attr_float("scale", 1.0f)) : std::nullopt;
}
float scale_of(const std::optional<float>& attribute, int64_t d) {
  return attribute ? *attribute : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

class Attention final : public Kernel {
 public:
  Attention(const Node& n, int64_t) : scale_(scale_attribute(n)), causal_(n.attr_int("is_causal", 0) != 0) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View& q = io.input(0);
    geometry(q, io.input(1), io.input(2), io.has_in(3) ? &io.input(3) : nullptr, "Attention");
    if (q.dtype != DType::kFloat16 && q.dtype != DType::kBFloat16) return 0;
    return sizeof(float) * static_cast<size_t>(q.numel() + io.input(1).numel() + io.input(2).numel());
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    dispatch(FloatTypes{}, io.input(0).dtype, [&](auto tag) { forward<typename decltype(tag)::type>(io, ctx); });
  }

 private:
  template <class T>
  void forward(KernelIO& io, const RunContext& ctx) const {
    using C = compute_t<T>;
    const View* mask = io.has_in(3) ? &io.input(3) : nullptr;
    const Geometry g = geometry(io.input(0), io.input(1), io.input(2), mask, "Attention");
    const C scale = static_cast<C>(scale_of(scale_, g.d));
    C* scratch = static_cast<C*>(io.workspace);
    const C* q = computed<T>(io.input(0), scratch, ctx.threads);
    const C* k = computed<T>(io.input(1), scratch, ctx.threads);
    const C* v = computed<T>(io.input(2), scratch, ctx.threads);
    T* y = io.output(0).as<T>();
    C* lse = nullptr;
    if (io.has_out(1)) {
      if (io.output(1).dtype != (std::is_same_v<C, double> ? DType::kDouble : DType::kFloat))
        throw InputError("Attention's LSE must be float32 (float64 for float64 inputs)");
      lse = io.output(1).as<C>();
    }
    const int64_t blocks = (g.tq + kQueryBlock - 1) / kQueryBlock;
    const C minus_inf = -std::numeric_limits<C>::infinity();
    parallel_for(g.batch * blocks, ctx.threads, 1, [&](int64_t w0, int64_t w1) {
      std::vector<C> s(kQueryBlock * kKeyBlock), acc(static_cast<size_t>(kQueryBlock * g.dv));
      std::vector<C> mx(kQueryBlock), sum(kQueryBlock);
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t b = w / blocks, q0 = (w % blocks) * kQueryBlock, rows = std::min(kQueryBlock, g.tq - q0);
        std::fill(acc.begin(), acc.end(), C(0));
        std::fill(mx.begin(), mx.end(), minus_inf);
        std::fill(sum.begin(), sum.end(), C(0));
        const int64_t seen = keys_seen(g, causal_, q0, rows);
        for (int64_t k0 = 0; k0 < seen; k0 += kKeyBlock) {
          const int64_t cols = std::min(kKeyBlock, seen - k0);
          block_scores(g, mask, causal_, scale, q, k, b, q0, rows, k0, cols, s.data());
          for (int64_t i = 0; i < rows; ++i) {
            C* row = s.data() + i * cols;
            C top = mx[i];
            for (int64_t j = 0; j < cols; ++j) top = std::max(top, row[j]);
            if (top == minus_inf) {  // every key so far hidden: nothing to add
              std::fill(row, row + cols, C(0));
              continue;
            }
            const C rescale = fast_exp(mx[i] - top);  // 0 while the row had seen nothing
            C part = 0;
            for (int64_t j = 0; j < cols; ++j) {
              const C p = fast_exp(row[j] - top);
              part += p;
              row[j] = as_operand<T>(p);
            }
            sum[i] = sum[i] * rescale + part;
            mx[i] = top;
            C* out = acc.data() + i * g.dv;
            for (int64_t c = 0; c < g.dv; ++c) out[c] *= rescale;
          }
          gemm(false, false, rows, g.dv, cols, C(1), s.data(), cols, v + (b * g.tk + k0) * g.dv, g.dv, C(1),
               acc.data(), g.dv);
        }
        for (int64_t i = 0; i < rows; ++i) {
          // A row whose every key is hidden has sum 0: 0/0, NaN, as the unfused Softmax gives.
          const C* out = acc.data() + i * g.dv;
          T* dst = y + (b * g.tq + q0 + i) * g.dv;
          for (int64_t c = 0; c < g.dv; ++c) dst[c] = store<T>(out[c] / sum[i]);
          if (lse) lse[b * g.tq + q0 + i] = mx[i] + std::log(sum[i]);
        }
      }
    });
  }

  std::optional<float> scale_;
  bool causal_;
};

// AttentionGrad(dY, Q, K, V, Y, LSE, [attn_mask]) -> dQ, dK, dV, [dMask].
class AttentionGrad final : public Kernel {
 public:
  AttentionGrad(const Node& n, int64_t) : scale_(scale_attribute(n)), causal_(n.attr_int("is_causal", 0) != 0) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View& q = io.input(1);
    const View* mask = io.has_in(6) ? &io.input(6) : nullptr;
    const Geometry g = geometry(q, io.input(2), io.input(3), mask, "AttentionGrad");
    if (io.input(0).dims != io.input(4).dims || io.input(4).dims.back() != g.dv)
      throw InputError("AttentionGrad: dY and Y must be [..., Tq, dv], got " + dims_str(io.input(0).dims) + " and " +
                       dims_str(io.input(4).dims));
    if (io.has_out(3) && (!mask || mask->dtype == DType::kBool))
      throw InputError("AttentionGrad: only a float attn_mask has a gradient");
    const size_t c = q.dtype == DType::kDouble ? sizeof(double) : sizeof(float);
    int64_t elements = g.batch * g.tq;  // D = rowsum(dY Y)
    if (q.dtype == DType::kFloat16 || q.dtype == DType::kBFloat16)
      elements += q.numel() + io.input(2).numel() + io.input(3).numel() + io.input(0).numel();
    if (io.has_out(3)) elements += std::max(1, io.threads) * mask->numel();
    return c * static_cast<size_t>(elements);
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    dispatch(FloatTypes{}, io.input(1).dtype, [&](auto tag) { backward<typename decltype(tag)::type>(io, ctx); });
  }

 private:
  template <class T>
  void backward(KernelIO& io, const RunContext& ctx) const {
    using C = compute_t<T>;
    const View* mask = io.has_in(6) ? &io.input(6) : nullptr;
    const Geometry g = geometry(io.input(1), io.input(2), io.input(3), mask, "AttentionGrad");
    const C scale = static_cast<C>(scale_of(scale_, g.d));
    if (io.input(5).dtype != (std::is_same_v<C, double> ? DType::kDouble : DType::kFloat))
      throw InputError("AttentionGrad: LSE must be float32 (float64 for float64 inputs)");
    const C* lse = io.input(5).as<C>();
    C* scratch = static_cast<C*>(io.workspace);
    C* rowdot = scratch;  // D_i = sum over c of dY[i, c] Y[i, c]
    scratch += g.batch * g.tq;
    {
      const T* dy = io.input(0).as<T>();
      const T* y = io.input(4).as<T>();
      parallel_for(g.batch * g.tq, ctx.threads, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          C dot = 0;
          for (int64_t c = 0; c < g.dv; ++c) dot += load(dy[r * g.dv + c]) * load(y[r * g.dv + c]);
          rowdot[r] = dot;
        }
      });
    }
    const C* dy = computed<T>(io.input(0), scratch, ctx.threads);
    const C* q = computed<T>(io.input(1), scratch, ctx.threads);
    const C* k = computed<T>(io.input(2), scratch, ctx.threads);
    const C* v = computed<T>(io.input(3), scratch, ctx.threads);

    // dS = P (dP - D) of one block, P recomputed from LSE; p and ds are rows x cols. Returns
    // nothing: p holds P as the dV product's operand, ds dS unrounded (the mask's gradient) and
    // ds_operand dS as the dQ and dK products' operand.
    auto block = [&](int64_t b, int64_t q0, int64_t rows, int64_t k0, int64_t cols, C* p, C* dp, C* ds, C* ds_operand) {
      block_scores(g, mask, causal_, scale, q, k, b, q0, rows, k0, cols, p);
      gemm(false, true, rows, cols, g.dv, C(1), dy + (b * g.tq + q0) * g.dv, g.dv, v + (b * g.tk + k0) * g.dv, g.dv,
           C(0), dp, cols);
      for (int64_t i = 0; i < rows; ++i) {
        const C row_lse = lse[b * g.tq + q0 + i], row_dot = rowdot[b * g.tq + q0 + i];
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t at = i * cols + j;
          const C prob = fast_exp(p[at] - row_lse);
          ds[at] = prob * (dp[at] - row_dot);
          ds_operand[at] = as_operand<T>(ds[at]);
          p[at] = as_operand<T>(prob);
        }
      }
    };

    const bool want_q = io.has_out(0), want_k = io.has_out(1), want_v = io.has_out(2), want_mask = io.has_out(3);
    const int64_t q_blocks = (g.tq + kQueryBlock - 1) / kQueryBlock, k_blocks = (g.tk + kKeyBlock - 1) / kKeyBlock;
    const size_t tile = static_cast<size_t>(kQueryBlock * kKeyBlock);
    if (want_k || want_v) {  // per key block: dK and dV over every query block that sees it
      parallel_for(g.batch * k_blocks, ctx.threads, 1, [&](int64_t w0, int64_t w1) {
        std::vector<C> p(tile), dp(tile), ds(tile), dso(tile);
        std::vector<C> dk(static_cast<size_t>(kKeyBlock * g.d)), dv(static_cast<size_t>(kKeyBlock * g.dv));
        for (int64_t w = w0; w < w1; ++w) {
          const int64_t b = w / k_blocks, k0 = (w % k_blocks) * kKeyBlock, cols = std::min(kKeyBlock, g.tk - k0);
          std::fill(dk.begin(), dk.end(), C(0));
          std::fill(dv.begin(), dv.end(), C(0));
          for (int64_t q0 = causal_ ? k0 / kQueryBlock * kQueryBlock : 0; q0 < g.tq; q0 += kQueryBlock) {
            const int64_t rows = std::min(kQueryBlock, g.tq - q0);
            block(b, q0, rows, k0, cols, p.data(), dp.data(), ds.data(), dso.data());
            gemm(true, false, cols, g.dv, rows, C(1), p.data(), cols, dy + (b * g.tq + q0) * g.dv, g.dv, C(1),
                 dv.data(), g.dv);
            gemm(true, false, cols, g.d, rows, scale, dso.data(), cols, q + (b * g.tq + q0) * g.d, g.d, C(1),
                 dk.data(), g.d);
          }
          if (want_k) store_rows(io.output(1).as<T>() + (b * g.tk + k0) * g.d, cols * g.d, [&](int64_t j) { return dk[j]; });
          if (want_v)
            store_rows(io.output(2).as<T>() + (b * g.tk + k0) * g.dv, cols * g.dv, [&](int64_t j) { return dv[j]; });
        }
      });
    }
    if (!want_q && !want_mask) return;
    // Per query block: dQ over the keys it sees, and the mask's gradient into one buffer per
    // chunk of work (a mask broadcast over heads or queries is shared by several blocks).
    const int64_t items = g.batch * q_blocks;
    const int chunks = static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>({ctx.threads, std::max(1, io.threads), items})));
    const int64_t mask_numel = want_mask ? mask->numel() : 0;
    C* mask_sums = scratch;
    if (want_mask) std::fill(mask_sums, mask_sums + chunks * mask_numel, C(0));
    parallel_for(chunks, chunks, 1, [&](int64_t c0, int64_t c1) {
      std::vector<C> p(tile), dp(tile), ds(tile), dso(tile), dq(static_cast<size_t>(kQueryBlock * g.d));
      for (int64_t chunk = c0; chunk < c1; ++chunk) {
        C* sums = mask_sums + chunk * mask_numel;
        for (int64_t w = items * chunk / chunks; w < items * (chunk + 1) / chunks; ++w) {
          const int64_t b = w / q_blocks, q0 = (w % q_blocks) * kQueryBlock, rows = std::min(kQueryBlock, g.tq - q0);
          std::fill(dq.begin(), dq.end(), C(0));
          const int64_t seen = keys_seen(g, causal_, q0, rows);
          for (int64_t k0 = 0; k0 < seen; k0 += kKeyBlock) {
            const int64_t cols = std::min(kKeyBlock, seen - k0);
            block(b, q0, rows, k0, cols, p.data(), dp.data(), ds.data(), dso.data());
            gemm(false, false, rows, g.d, cols, scale, dso.data(), cols, k + (b * g.tk + k0) * g.d, g.d, C(1),
                 dq.data(), g.d);
            if (want_mask) {
              const int64_t base = g.mask_offset[static_cast<size_t>(b)] + q0 * g.mask_row + k0 * g.mask_col;
              for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) sums[base + i * g.mask_row + j * g.mask_col] += ds[i * cols + j];
            }
          }
          if (want_q) store_rows(io.output(0).as<T>() + (b * g.tq + q0) * g.d, rows * g.d, [&](int64_t j) { return dq[j]; });
        }
      }
    });
    if (!want_mask) return;
    // Hidden keys have P = 0 and so dS = 0: the keys the causal loop skipped add nothing.
    dispatch(FloatTypes{}, io.output(3).dtype, [&](auto tag) {
      using M = typename decltype(tag)::type;
      store_rows(io.output(3).as<M>(), mask_numel, [&](int64_t j) {
        C total = 0;
        for (int c = 0; c < chunks; ++c) total += mask_sums[c * mask_numel + j];
        return total;
      });
    });
  }

  std::optional<float> scale_;
  bool causal_;
};

}  // namespace

const std::vector<OpEntry>& attention_ops() {
  static const std::vector<OpEntry> ops = {
      {"Attention", make_kernel<Attention>, FloatTypes::mask(), {}},
      {"AttentionGrad", make_kernel<AttentionGrad>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
