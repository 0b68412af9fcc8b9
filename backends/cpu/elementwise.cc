// Elementwise ops: unary math, binary arithmetic and comparisons with numpy broadcasting, the
// variadic Min/Max, Where and Clip. 16-bit inputs are widened to fp32, computed, and rounded once
// on store, as a GPU's elementwise kernels do; everything else computes in its own type.
#include <cmath>
#include <limits>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// 16-bit tensors go through fp32 blocks of this many elements: one bulk widen per input, the op
// on floats (vectorized), one bulk narrow.
constexpr int64_t kBlock = 256;
template <class T>
constexpr bool is_16bit_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// ---- unary

template <class Op>
class Unary final : public Kernel {
 public:
  Unary(const Node& n, int64_t) : op_(n) {}
  size_t infer(KernelIO& io) const override {
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = io.input(0).dims;
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(typename Op::Types{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        if constexpr (is_16bit_v<T>) {
          float block[kBlock];
          for (int64_t i0 = b; i0 < e; i0 += kBlock) {
            const int64_t m = std::min(kBlock, e - i0);
            widen(in + i0, block, m);
#pragma omp simd
            for (int64_t j = 0; j < m; ++j) block[j] = op_(block[j]);
            narrow(block, out + i0, m);
          }
        } else {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) out[i] = store<T>(static_cast<C>(op_(load(in[i]))));
        }
      });
    });
  }

 private:
  Op op_;
};

struct NoAttrs {
  explicit NoAttrs(const Node&) {}
};

struct ReluOp : NoAttrs {
  using NoAttrs::NoAttrs;
  using Types = SignedTypes;
  template <class C>
  C operator()(C x) const {
    return x > C(0) ? x : C(0);
  }
};
struct LeakyReluOp {
  using Types = FloatTypes;
  explicit LeakyReluOp(const Node& n) : alpha(n.attr_float("alpha", 0.01f)) {}
  template <class C>
  C operator()(C x) const {
    return x >= C(0) ? x : x * static_cast<C>(alpha);
  }
  float alpha;
};
struct SigmoidOp : NoAttrs {
  using NoAttrs::NoAttrs;
  using Types = FloatTypes;
  template <class C>
  C operator()(C x) const {
    // Written so neither branch overflows: exp of a non-positive number only.
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  }
};
#define AMP_UNARY_FLOAT(Name, expr)      \
  struct Name : NoAttrs {                \
    using NoAttrs::NoAttrs;              \
    using Types = FloatTypes;            \
    template <class C>                   \
    C operator()(C x) const {            \
      return expr;                       \
    }                                    \
  };
AMP_UNARY_FLOAT(TanhOp, std::tanh(x))
AMP_UNARY_FLOAT(ErfOp, std::erf(x))
AMP_UNARY_FLOAT(ExpOp, std::exp(x))
AMP_UNARY_FLOAT(LogOp, std::log(x))
AMP_UNARY_FLOAT(SqrtOp, std::sqrt(x))
AMP_UNARY_FLOAT(ReciprocalOp, C(1) / x)
#undef AMP_UNARY_FLOAT
struct NegOp : NoAttrs {
  using NoAttrs::NoAttrs;
  using Types = SignedTypes;
  template <class C>
  C operator()(C x) const {
    return -x;
  }
};
struct AbsOp : NoAttrs {
  using NoAttrs::NoAttrs;
  using Types = NumericTypes;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C(0) ? -x : x;
  }
};
struct NotOp : NoAttrs {
  using NoAttrs::NoAttrs;
  using Types = TypeList<bool>;
  bool operator()(bool x) const { return !x; }
};

// ---- binary, with broadcasting

// f(loaded a, loaded b) returns the stored output element.
template <class R, class A, class B, class F>
void apply_binary(const Broadcast& bc, const A* a, const B* b, R* out, int threads, F f) {
  for_each_row(bc, threads, [&](int64_t o, const int64_t* offs) {
    const A* pa = a + offs[0];
    const B* pb = b + offs[1];
    R* po = out + o;
    const int64_t n = bc.inner();
    // omp simd: the rows may alias (Min/Max fold in place), which stops GCC's own vectorizer.
    if (bc.inner_stride(0) && bc.inner_stride(1)) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) po[i] = f(load(pa[i]), load(pb[i]));
    } else if (bc.inner_stride(0)) {
      const auto y = load(pb[0]);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) po[i] = f(load(pa[i]), y);
    } else if (bc.inner_stride(1)) {
      const auto x = load(pa[0]);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) po[i] = f(x, load(pb[i]));
    } else {
      std::fill(po, po + n, f(load(pa[0]), load(pb[0])));
    }
  });
}

// The same for 16-bit T, in fp32 blocks: f(float, float) -> float.
template <class T, class F>
void apply_binary_blocks(const Broadcast& bc, const T* a, const T* b, T* out, int threads, F f) {
  for_each_row(bc, threads, [&](int64_t o, const int64_t* offs) {
    float xa[kBlock], xb[kBlock];
    const T* pa = a + offs[0];
    const T* pb = b + offs[1];
    for (int64_t i0 = 0; i0 < bc.inner(); i0 += kBlock) {
      const int64_t m = std::min(kBlock, bc.inner() - i0);
      if (bc.inner_stride(0))
        widen(pa + i0, xa, m);
      else
        std::fill(xa, xa + m, load(pa[0]));
      if (bc.inner_stride(1))
        widen(pb + i0, xb, m);
      else
        std::fill(xb, xb + m, load(pb[0]));
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) xa[j] = f(xa[j], xb[j]);
      narrow(xa, out + o + i0, m);
    }
  });
}

void require_same_types(const KernelIO& io, size_t n) {
  for (size_t i = 1; i < n; ++i)
    if (io.has_in(i) && io.input(i).dtype != io.input(0).dtype)
      throw InputError("inputs have different element types (" + std::string(dtype_name(io.input(0).dtype)) +
                       " and " + std::string(dtype_name(io.input(i).dtype)) + ")");
}

// Arithmetic: the output has the inputs' type.
template <class Op>
class Arith final : public Kernel {
 public:
  Arith(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    require_same_types(io, 2);
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = Broadcast::result_dims({&io.input(0).dims, &io.input(1).dims});
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    dispatch(NumericTypes{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      if constexpr (is_16bit_v<T>)
        apply_binary_blocks(bc, a.as<T>(), b.as<T>(), io.output(0).as<T>(), ctx.threads,
                            [](float x, float y) { return Op{}(x, y); });
      else
        apply_binary(bc, a.as<T>(), b.as<T>(), io.output(0).as<T>(), ctx.threads,
                     [](C x, C y) { return store<T>(static_cast<C>(Op{}(x, y))); });
    });
  }
};

struct AddOp {
  template <class C>
  C operator()(C x, C y) const {
    return x + y;
  }
};
struct SubOp {
  template <class C>
  C operator()(C x, C y) const {
    return x - y;
  }
};
struct MulOp {
  template <class C>
  C operator()(C x, C y) const {
    return x * y;
  }
};
struct DivOp {
  template <class C>
  C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>)
      return y == 0 ? C(0) : x / y;  // numpy's answer, instead of a SIGFPE
    else
      return x / y;
  }
};

// Comparisons and logic: bool out.
template <class Op, class Types>
class Compare final : public Kernel {
 public:
  Compare(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    require_same_types(io, 2);
    io.output(0).dtype = DType::kBool;
    io.output(0).dims = Broadcast::result_dims({&io.input(0).dims, &io.input(1).dims});
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    dispatch(Types{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      apply_binary(bc, a.as<T>(), b.as<T>(), io.output(0).as<bool>(), ctx.threads,
                   [](C x, C y) { return static_cast<bool>(Op{}(x, y)); });
    });
  }
};

struct EqualOp {
  template <class C>
  bool operator()(C x, C y) const {
    return x == y;
  }
};
struct LessOp {
  template <class C>
  bool operator()(C x, C y) const {
    return x < y;
  }
};
struct GreaterOp {
  template <class C>
  bool operator()(C x, C y) const {
    return x > y;
  }
};
struct AndOp {
  bool operator()(bool x, bool y) const { return x && y; }
};

// Pow: base and exponent may differ in type; the output has the base's. Integer bases are
// computed in double (exact for the results an integer can hold) and truncated.
class Pow final : public Kernel {
 public:
  Pow(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = Broadcast::result_dims({&io.input(0).dims, &io.input(1).dims});
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    dispatch(TypeList<float, f16, bf16, double, int32_t, int64_t>{}, a.dtype, [&](auto base) {
      using T = typename decltype(base)::type;
      using C = compute_t<T>;
      dispatch(NumericTypes{}, b.dtype, [&](auto exponent) {
        using E = typename decltype(exponent)::type;
        apply_binary(bc, a.as<T>(), b.as<E>(), io.output(0).as<T>(), ctx.threads, [](C x, compute_t<E> y) {
          if constexpr (std::is_integral_v<C>)
            return store<T>(static_cast<C>(std::pow(static_cast<double>(x), static_cast<double>(y))));
          else
            return store<T>(std::pow(x, static_cast<C>(y)));
        });
      });
    });
  }
};

// Min / Max over any number of inputs: the output starts as input 0 broadcast, then folds in each
// further input. NaN wins, as in numpy's minimum / maximum.
template <bool kMax>
class MinMax final : public Kernel {
 public:
  MinMax(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    require_same_types(io, io.in.size());
    std::vector<const std::vector<int64_t>*> dims;
    for (const View* v : io.in) dims.push_back(&v->dims);
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = Broadcast::result_dims(dims);
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    View& out = io.output(0);
    dispatch(NumericTypes{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      T* o = out.as<T>();
      {
        const Broadcast bc({&out.dims, &io.input(0).dims});
        apply_binary(bc, o, io.input(0).as<T>(), o, ctx.threads, [](C, C y) { return store<T>(y); });
      }
      for (size_t k = 1; k < io.in.size(); ++k) {
        const Broadcast bc({&out.dims, &io.input(k).dims});
        apply_binary(bc, o, io.input(k).as<T>(), o, ctx.threads, [](C x, C y) {
          if constexpr (std::is_floating_point_v<C>)
            if (x != x || y != y) return store<T>(x != x ? x : y);
          return store<T>(kMax ? (y > x ? y : x) : (y < x ? y : x));
        });
      }
    });
  }
};

class Where final : public Kernel {
 public:
  Where(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    if (io.input(0).dtype != DType::kBool) throw InputError("condition must be bool");
    if (io.input(1).dtype != io.input(2).dtype) throw InputError("X and Y have different element types");
    io.output(0).dtype = io.input(1).dtype;
    io.output(0).dims = Broadcast::result_dims({&io.input(0).dims, &io.input(1).dims, &io.input(2).dims});
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &c = io.input(0), &x = io.input(1), &y = io.input(2);
    const Broadcast bc({&c.dims, &x.dims, &y.dims});
    dispatch(AllTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool* pc = c.as<bool>();
      const T* px = x.as<T>();
      const T* py = y.as<T>();
      T* po = io.output(0).as<T>();
      const int64_t sc = bc.inner_stride(0), sx = bc.inner_stride(1), sy = bc.inner_stride(2);
      for_each_row(bc, ctx.threads, [&](int64_t o, const int64_t* offs) {
        const bool* rc = pc + offs[0];
        const T* rx = px + offs[1];
        const T* ry = py + offs[2];
        for (int64_t i = 0; i < bc.inner(); ++i) po[o + i] = rc[i * sc] ? rx[i * sx] : ry[i * sy];
      });
    });
  }
};

// Clip: bounds are optional scalar inputs (opset 11+) or float attributes (before).
class Clip final : public Kernel {
 public:
  Clip(const Node& n, int64_t opset) {
    if (opset < 11) {
      attr_min_ = n.attr_float("min", -std::numeric_limits<float>::infinity());
      attr_max_ = n.attr_float("max", std::numeric_limits<float>::infinity());
      attrs_ = true;
    }
  }
  size_t infer(KernelIO& io) const override {
    require_same_types(io, 3);
    for (size_t i = 1; i < 3; ++i)
      if (io.has_in(i) && io.input(i).numel() != 1) throw InputError("min and max must be scalars");
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = io.input(0).dims;
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    dispatch(NumericTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if (attrs_) {
        lo = static_cast<C>(std::max<double>(attr_min_, static_cast<double>(lo)));
        hi = static_cast<C>(std::min<double>(attr_max_, static_cast<double>(hi)));
      }
      if (io.has_in(1)) lo = load(io.input(1).as<T>()[0]);
      if (io.has_in(2)) hi = load(io.input(2).as<T>()[0]);
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const C v = load(in[i]);
          out[i] = store<T>(v < lo ? lo : (v > hi ? hi : v));
        }
      });
    });
  }

 private:
  bool attrs_ = false;
  float attr_min_ = 0, attr_max_ = 0;
};

constexpr uint32_t kFloat = FloatTypes::mask();
constexpr uint32_t kNumeric = NumericTypes::mask();
constexpr uint32_t kBool = TypeList<bool>::mask();

}  // namespace

const std::vector<OpEntry>& elementwise_ops() {
  static const std::vector<OpEntry> ops = {
      {"Relu", make_kernel<Unary<ReluOp>>, SignedTypes::mask(), {}},
      {"LeakyRelu", make_kernel<Unary<LeakyReluOp>>, kFloat, {}},
      {"Sigmoid", make_kernel<Unary<SigmoidOp>>, kFloat, {}},
      {"Tanh", make_kernel<Unary<TanhOp>>, kFloat, {}},
      {"Erf", make_kernel<Unary<ErfOp>>, kFloat, {}},
      {"Exp", make_kernel<Unary<ExpOp>>, kFloat, {}},
      {"Log", make_kernel<Unary<LogOp>>, kFloat, {}},
      {"Sqrt", make_kernel<Unary<SqrtOp>>, kFloat, {}},
      {"Reciprocal", make_kernel<Unary<ReciprocalOp>>, kFloat, {}},
      {"Neg", make_kernel<Unary<NegOp>>, SignedTypes::mask(), {}},
      {"Abs", make_kernel<Unary<AbsOp>>, kNumeric, {}},
      {"Not", make_kernel<Unary<NotOp>>, kBool, {}},
      {"Add", make_kernel<Arith<AddOp>>, kNumeric, {}},
      {"Sub", make_kernel<Arith<SubOp>>, kNumeric, {}},
      {"Mul", make_kernel<Arith<MulOp>>, kNumeric, {}},
      {"Div", make_kernel<Arith<DivOp>>, kNumeric, {}},
      {"Pow", make_kernel<Pow>, TypeList<float, f16, bf16, double, int32_t, int64_t>::mask(), {}},
      {"Min", make_kernel<MinMax<false>>, kNumeric, {}},
      {"Max", make_kernel<MinMax<true>>, kNumeric, {}},
      {"Equal", make_kernel<Compare<EqualOp, AllTypes>>, AllTypes::mask(), {}},
      {"Less", make_kernel<Compare<LessOp, NumericTypes>>, kNumeric, {}},
      {"Greater", make_kernel<Compare<GreaterOp, NumericTypes>>, kNumeric, {}},
      {"And", make_kernel<Compare<AndOp, TypeList<bool>>>, kBool, {}},
      {"Where", make_kernel<Where>, kBool, {}},
      {"Clip", make_kernel<Clip>, kNumeric, {}},
  };
  return ops;
}

}  // namespace amp::cpu
