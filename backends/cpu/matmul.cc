// MatMul (numpy semantics: batch dims broadcast, 1-D operands promoted) and Gemm. fp32 and fp64
// go straight to OpenBLAS; fp16/bf16 operands are widened to fp32 in scratch, multiplied with
// fp32 accumulation, and the result is rounded once — a tensor core's fp16 x fp16 -> fp32 -> fp16.
// fp32 and bf16 MatMuls whose batch dims are shared or equal run on oneDNN's matmul instead (same
// contract; native bf16 dot products; backends/cpu/onednn_matmul.h) where the CPU has it.
// MatMulInteger and QLinearMatMul: the same shapes in exact int32 arithmetic (integer_quant.h).
#include <memory>

#include "backends/cpu/blas.h"
#include "backends/cpu/integer_quant.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/onednn_matmul.h"
#include "backends/cpu/onednn_runtime.h"

namespace amp::cpu {
namespace {

struct MatMulShape {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_batch, b_batch, out_dims;
};

MatMulShape matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) throw InputError("MatMul operands must have rank >= 1");
  MatMulShape s;
  s.k = a.back();
  s.m = a.size() >= 2 ? a[a.size() - 2] : 1;
  const int64_t kb = b.size() >= 2 ? b[b.size() - 2] : b[0];
  s.n = b.size() >= 2 ? b.back() : 1;
  if (kb != s.k) throw InputError("MatMul shapes " + dims_str(a) + " and " + dims_str(b) + " do not multiply");
  s.a_batch.assign(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  s.b_batch.assign(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  s.out_dims = Broadcast::result_dims({&s.a_batch, &s.b_batch});
  if (a.size() >= 2) s.out_dims.push_back(s.m);
  if (b.size() >= 2) s.out_dims.push_back(s.n);
  return s;
}

// For each output batch, the batch indices of A and B it multiplies (the batch dims broadcast).
std::vector<std::pair<int64_t, int64_t>> batch_pairs(const MatMulShape& s) {
  const Broadcast bc({&s.a_batch, &s.b_batch});
  std::vector<std::pair<int64_t, int64_t>> pairs;
  int64_t offs[4];
  for (int64_t r = 0; r < bc.rows(); ++r) {
    bc.row_offsets(r, offs);
    for (int64_t i = 0; i < bc.inner(); ++i)
      pairs.emplace_back(offs[0] + i * bc.inner_stride(0), offs[1] + i * bc.inner_stride(1));
  }
  return pairs;
}

// out[batch] = a[batch] @ b[batch] for contiguous row-major operands, F float or double.
template <class F>
void batched_matmul(const MatMulShape& s, const F* a, const F* b, F* out, int threads) {
  const int64_t batches = product(s.out_dims) / std::max<int64_t>(1, s.m * s.n);
  if (batches == 0) return;
  // One weight matrix shared by every batch (a Linear layer on [N,T,C]): one tall product.
  if (product(s.b_batch) == 1 && product(s.a_batch) == batches) {
    parallel_gemm<F>(false, false, batches * s.m, s.n, s.k, F(1), a, s.k, b, s.n, F(0), out, s.n, threads);
    return;
  }
  const std::vector<std::pair<int64_t, int64_t>> pairs = batch_pairs(s);
  auto one = [&](int64_t i, int cores) {
    parallel_gemm<F>(false, false, s.m, s.n, s.k, F(1), a + pairs[i].first * s.m * s.k, s.k,
                     b + pairs[i].second * s.k * s.n, s.n, F(0), out + i * s.m * s.n, s.n, cores);
  };
  // Small products (attention heads): whole products per core. Large ones: each split over cores.
  if (s.m * s.n * s.k <= kGemmGrain) {
    parallel_for(batches, threads, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) one(i, 1);
    });
  } else {
    for (int64_t i = 0; i < batches; ++i) one(i, threads);
  }
}

// out[batch] = a[batch] @ b[batch] in int32, as ONNX's integer matmuls accumulate.
void batched_int_matmul(const MatMulShape& s, const int32_t* a, const int32_t* b, int32_t* out, int threads) {
  const int64_t batches = product(s.out_dims) / std::max<int64_t>(1, s.m * s.n);
  if (batches == 0) return;
  const std::vector<std::pair<int64_t, int64_t>> pairs = batch_pairs(s);
  parallel_for(batches * s.m, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s.k * s.n, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t i = r / s.m, row = r % s.m;
                   const int32_t* ar = a + (pairs[static_cast<size_t>(i)].first * s.m + row) * s.k;
                   const int32_t* bm = b + pairs[static_cast<size_t>(i)].second * s.k * s.n;
                   int32_t* o = out + r * s.n;
                   std::fill(o, o + s.n, 0);
                   for (int64_t k = 0; k < s.k; ++k) {
                     const int32_t av = ar[k];
                     const int32_t* br = bm + k * s.n;
                     for (int64_t j = 0; j < s.n; ++j) o[j] = wrapping_add(o[j], av * br[j]);
                   }
                 }
               });
}

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> int32 and QLinearMatMul(a, a_scale, a_zero_point,
// b, b_scale, b_zero_point, y_scale, y_zero_point) -> y_zero_point's type: (A - a_zp) @ (B - b_zp) in
// int32, the zero points and scales per tensor or per row of A / column of B; QLinearMatMul
// requantizes with a_scale b_scale / y_scale.
template <bool kQLinear>
class IntegerMatMul final : public Kernel {
 public:
  IntegerMatMul(const Node&, int64_t) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View &a = io.input(0), &b = io.input(kB);
    return fp32_scratch(a.numel()) + fp32_scratch(b.numel()) + (kQLinear ? fp32_scratch(io.output(0).numel()) : 0);
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(kB);
    const MatMulShape s = matmul_shape(a.dims, b.dims);
    auto* a32 = static_cast<int32_t*>(io.workspace);
    auto* b32 = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(a32) + fp32_scratch(a.numel()));
    const View* a_zp = io.has_in(2) ? &io.input(2) : nullptr;  // input 2 in both ops
    const View* b_zp = io.has_in(kBZeroPoint) ? &io.input(kBZeroPoint) : nullptr;
    widen_minus_zero_point(a, a_zp, s.k, s.m, a32, "A");
    widen_minus_zero_point(b, b_zp, 1, s.n, b32, "B");
    if constexpr (!kQLinear) {
      batched_int_matmul(s, a32, b32, io.output(0).as<int32_t>(), ctx.threads);
    } else {
      auto* acc = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(b32) + fp32_scratch(b.numel()));
      batched_int_matmul(s, a32, b32, acc, ctx.threads);
      const Scales a_scale(io.input(1), s.m, "a_scale"), b_scale(io.input(4), s.n, "b_scale"), y_scale(io.input(6), 1, "y_scale");
      const int32_t y_zp = scalar_zero_point(&io.input(7), "y_zero_point");
      View& y = io.output(0);
      const int64_t total = y.numel();
      for (int64_t e = 0; e < total; ++e) {
        const int64_t col = e % s.n, row = e / s.n % s.m;
        requantize(acc[e], a_scale.at(row) * b_scale.at(col) / y_scale.at(0), y_zp, y.dtype, y.data, e);
      }
    }
  }

 private:
  static constexpr size_t kB = kQLinear ? 3 : 1;            // B's input index
  static constexpr size_t kBZeroPoint = kQLinear ? 5 : 3;   // b_zero_point's
};

class MatMul final : public Kernel {
 public:
  MatMul(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View &a = io.input(0), &b = io.input(1);
    if (const DnnlMatMul* fast = onednn(io)) return fast->scratch_bytes();
    if (!is_low_precision(a.dtype)) return 0;
    return fp32_scratch(a.numel()) + fp32_scratch(b.numel()) + fp32_scratch(io.output(0).numel());
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    View& out = io.output(0);
    if (const DnnlMatMul* fast = onednn(io)) {
      fast->run(a.data, b.data, out.data, io.workspace);
      return;
    }
    const MatMulShape s = matmul_shape(a.dims, b.dims);
    dispatch(FloatTypes{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        batched_matmul<T>(s, a.as<T>(), b.as<T>(), out.as<T>(), ctx.threads);
      } else {
        float* a32 = static_cast<float*>(io.workspace);
        float* b32 = a32 + fp32_scratch(a.numel()) / 4;
        float* o32 = b32 + fp32_scratch(b.numel()) / 4;
        widen(a.as<T>(), a32, a.numel(), ctx.threads);
        widen(b.as<T>(), b32, b.numel(), ctx.threads);
        batched_matmul<float>(s, a32, b32, o32, ctx.threads);
        narrow(o32, out.as<T>(), out.numel(), ctx.threads);
      }
    });
  }

 private:
  // The oneDNN product for these operands (fp32 or bf16), made on first use per shape signature;
  // null for other types, broadcast batch dims oneDNN's matmul is not given here, or no
  // implementation.
  const DnnlMatMul* onednn(const KernelIO& io) const {
    const View &a = io.input(0), &b = io.input(1);
    const bool fp32 = a.dtype == DType::kFloat && b.dtype == DType::kFloat;
    if (!fp32 && (a.dtype != DType::kBFloat16 || b.dtype != DType::kBFloat16)) return nullptr;
    return prepared_.find_or_make(a.dims, b.dims, fp32, io.threads, [&]() -> std::unique_ptr<DnnlMatMul> {
      const MatMulShape s = matmul_shape(a.dims, b.dims);
      const int64_t batches = product(s.out_dims) / std::max<int64_t>(1, s.m * s.n);
      const int64_t a_batches = product(s.a_batch), b_batches = product(s.b_batch);
      MatMulGeometry g;
      g.k = s.k;
      g.n = s.n;
      if (b_batches == 1 && a_batches == batches) {  // shared weights: one tall product
        g.m = batches * s.m;
        g.shared_b = true;
      } else if (s.a_batch == s.b_batch) {
        g.batch = batches;
        g.m = s.m;
      } else if (a_batches == 1 && b_batches == batches) {
        g.batch = batches;
        g.m = s.m;
        g.shared_a = true;
      } else {
        return nullptr;
      }
      return std::make_unique<DnnlMatMul>(g, io.threads, fp32);
    });
  }

  onednn::PrimitiveCache<DnnlMatMul> prepared_;
};

// Y = alpha * A' B' + beta * C, C broadcast to [M, N]. For 16-bit types the fp32 accumulator
// takes beta * C before the product, so Y is rounded once (a GEMM epilogue, not a second kernel).
class Gemm final : public Kernel {
 public:
  Gemm(const Node& n, int64_t)
      : trans_a_(n.attr_int("transA", 0) != 0),
        trans_b_(n.attr_int("transB", 0) != 0),
        alpha_(n.attr_float("alpha", 1.0f)),
        beta_(n.attr_float("beta", 1.0f)) {}

  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    const View &a = io.input(0), &b = io.input(1);
    if (!is_low_precision(a.dtype)) return 0;
    return fp32_scratch(a.numel()) + fp32_scratch(b.numel()) + fp32_scratch(io.output(0).numel());
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    View& y = io.output(0);
    dispatch(FloatTypes{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        product<T>(io, a.as<T>(), b.as<T>(), y.as<T>(), ctx.threads);
      } else {
        float* a32 = static_cast<float*>(io.workspace);
        float* b32 = a32 + fp32_scratch(a.numel()) / 4;
        float* y32 = b32 + fp32_scratch(b.numel()) / 4;
        widen(a.as<T>(), a32, a.numel(), ctx.threads);
        widen(b.as<T>(), b32, b.numel(), ctx.threads);
        product<float>(io, a32, b32, y32, ctx.threads);
        narrow(y32, y.as<T>(), y.numel(), ctx.threads);
      }
    });
  }

 private:
  // y (F, [M,N]) = alpha a b + beta C, reading C in its storage type.
  template <class F>
  void product(const KernelIO& io, const F* a, const F* b, F* y, int threads) const {
    const View& yv = *io.out[0];
    const int64_t m = yv.dims[0], n = yv.dims[1];
    const int64_t k = io.input(0).dims[trans_a_ ? 0 : 1];
    F beta = F(0);
    if (io.has_in(2) && beta_ != 0.0f) {
      beta = static_cast<F>(beta_);
      const View& c = io.input(2);
      const Broadcast bc({&yv.dims, &c.dims});
      dispatch(FloatTypes{}, c.dtype, [&](auto tag) {
        using C = typename decltype(tag)::type;
        const C* pc = c.as<C>();
        for (int64_t r = 0; r < bc.rows(); ++r) {
          int64_t offs[4];
          bc.row_offsets(r, offs);
          for (int64_t i = 0; i < bc.inner(); ++i)
            y[r * bc.inner() + i] = static_cast<F>(load(pc[offs[1] + i * bc.inner_stride(1)]));
        }
      });
    }
    parallel_gemm<F>(trans_a_, trans_b_, m, n, k, static_cast<F>(alpha_), a, trans_a_ ? m : k, b, trans_b_ ? k : n, beta,
                     y, n, threads);
  }

  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

}  // namespace

const std::vector<OpEntry>& matmul_ops() {
  static const std::vector<OpEntry> ops = {
      {"MatMul", make_kernel<MatMul>, FloatTypes::mask(), {}},
      {"Gemm", make_kernel<Gemm>, FloatTypes::mask(), {}},
      {"MatMulInteger", make_kernel<IntegerMatMul<false>>, TypeList<uint8_t, int8_t>::mask(), {}},
      {"QLinearMatMul", make_kernel<IntegerMatMul<true>>, TypeList<uint8_t, int8_t>::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
