// Elementwise ops: one kernel template per form of the op table (graph/ops/elementwise_ops.inc) —
// maps, same-type arithmetic and comparisons with numpy broadcasting, Pow, the variadic Min/Max,
// Where and Clip — instantiated with each row's host math, so every row of the table is a CPU op
// and computes what a fused kernel computes. 16-bit inputs are widened to fp32 in blocks,
// computed, and rounded once on store, as a GPU's elementwise kernels do; everything else computes
// in its own type. (Cast and Identity have kernels of their own: cast.cc, shape_ops.cc.)
#include <cmath>
#include <limits>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/elementwise_ops.h"

namespace amp::cpu {
namespace {

// 16-bit tensors go through fp32 blocks of this many elements: one bulk widen per input, the op
// on floats (vectorized), one bulk narrow.
constexpr int64_t kBlock = 256;
template <class T>
constexpr bool is_16bit_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// The storage types of a table type set.
template <ElemTypes>
struct TypesOf;
template <>
struct TypesOf<ElemTypes::kFloat> {
  using type = FloatTypes;
};
template <>
struct TypesOf<ElemTypes::kSigned> {
  using type = SignedTypes;
};
template <>
struct TypesOf<ElemTypes::kNumeric> {
  using type = NumericTypes;
};
template <>
struct TypesOf<ElemTypes::kBool> {
  using type = TypeList<bool>;
};
template <>
struct TypesOf<ElemTypes::kAll> {
  using type = AllTypes;
};
template <>
struct TypesOf<ElemTypes::kPowBase> {
  using type = TypeList<float, f16, bf16, double, int32_t, int64_t>;
};
template <ElemTypes t>
using types_of = typename TypesOf<t>::type;
static_assert(types_of<ElemTypes::kFloat>::mask() == elem_type_mask(ElemTypes::kFloat) &&
                  types_of<ElemTypes::kSigned>::mask() == elem_type_mask(ElemTypes::kSigned) &&
                  types_of<ElemTypes::kNumeric>::mask() == elem_type_mask(ElemTypes::kNumeric) &&
                  types_of<ElemTypes::kBool>::mask() == elem_type_mask(ElemTypes::kBool) &&
                  types_of<ElemTypes::kAll>::mask() == elem_type_mask(ElemTypes::kAll) &&
                  types_of<ElemTypes::kPowBase>::mask() == elem_type_mask(ElemTypes::kPowBase),
              "the CPU's type lists are the table's type sets");

// ---- maps: y = f(x)

template <class Row, class T>
AMP_VECTOR_CLONES void map_span(const T* in, T* out, int64_t n, ElemParamValues p) {
  using C = compute_t<T>;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const C v = load(in[i]);
    out[i] = store<T>(static_cast<C>(Row::math(v, v, v, p)));
  }
}

template <class Row>
AMP_VECTOR_CLONES void map_block(float* block, int64_t m, ElemParamValues p) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) block[j] = static_cast<float>(Row::math(block[j], block[j], block[j], p));
}

template <class Row>
class Map final : public Kernel {
 public:
  Map(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        if constexpr (is_16bit_v<T>) {
          float block[kBlock];
          for (int64_t i0 = b; i0 < e; i0 += kBlock) {
            const int64_t m = std::min(kBlock, e - i0);
            widen(in + i0, block, m);
            map_block<Row>(block, m, p);
            narrow(block, out + i0, m);
          }
        } else {
          map_span<Row>(in + b, out + b, e - b, p);
        }
      });
    });
  }

 private:
  ElemParamValues p_;
};

// ---- two operands, with broadcasting

// One output row of n elements: po[i] = f(a, b) with a and b read along the row or held.
template <class R, class A, class B, class F>
AMP_VECTOR_CLONES void binary_row(const A* pa, bool a_varies, const B* pb, bool b_varies, R* po, int64_t n, F f) {
  // omp simd: the rows may alias (Min/Max fold in place), which stops GCC's own vectorizer.
  if (a_varies && b_varies) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) po[i] = f(load(pa[i]), load(pb[i]));
  } else if (a_varies) {
    const auto y = load(pb[0]);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) po[i] = f(load(pa[i]), y);
  } else if (b_varies) {
    const auto x = load(pa[0]);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) po[i] = f(x, load(pb[i]));
  } else {
    std::fill(po, po + n, f(load(pa[0]), load(pb[0])));
  }
}

// f(loaded a, loaded b) returns the stored output element.
template <class R, class A, class B, class F>
void apply_binary(const Broadcast& bc, const A* a, const B* b, R* out, int threads, F f) {
  const bool a_varies = bc.inner_stride(0) != 0, b_varies = bc.inner_stride(1) != 0;
  for_each_row(bc, threads, [&](int64_t o, const int64_t* offs, int64_t n) {
    binary_row(a + offs[0], a_varies, b + offs[1], b_varies, out + o, n, f);
  });
}

template <class F>
AMP_VECTOR_CLONES void binary_block(float* xa, const float* xb, int64_t m, F f) {
#pragma omp simd
  for (int64_t j = 0; j < m; ++j) xa[j] = f(xa[j], xb[j]);
}

// The same for 16-bit T, in fp32 blocks: f(float, float) -> float.
template <class T, class F>
void apply_binary_blocks(const Broadcast& bc, const T* a, const T* b, T* out, int threads, F f) {
  for_each_row(bc, threads, [&](int64_t o, const int64_t* offs, int64_t n) {
    float xa[kBlock], xb[kBlock];
    const T* pa = a + offs[0];
    const T* pb = b + offs[1];
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t m = std::min(kBlock, n - i0);
      if (bc.inner_stride(0))
        widen(pa + i0, xa, m);
      else
        std::fill(xa, xa + m, load(pa[0]));
      if (bc.inner_stride(1))
        widen(pb + i0, xb, m);
      else
        std::fill(xb, xb + m, load(pb[0]));
      binary_block(xa, xb, m, f);
      narrow(xa, out + o + i0, m);
    }
  });
}

// y = f(a, b) of one type.
template <class Row>
class Zip final : public Kernel {
 public:
  Zip(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      if constexpr (is_16bit_v<T>)
        apply_binary_blocks(bc, a.as<T>(), b.as<T>(), io.output(0).as<T>(), ctx.threads,
                            [p](float x, float y) { return static_cast<float>(Row::math(x, y, y, p)); });
      else
        apply_binary(bc, a.as<T>(), b.as<T>(), io.output(0).as<T>(), ctx.threads,
                     [p](C x, C y) { return store<T>(static_cast<C>(Row::math(x, y, y, p))); });
    });
  }

 private:
  ElemParamValues p_;
};

// y = f(a, b) of one type, bool.
template <class Row>
class Compare final : public Kernel {
 public:
  Compare(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      apply_binary(bc, a.as<T>(), b.as<T>(), io.output(0).as<bool>(), ctx.threads,
                   [p](C x, C y) { return static_cast<bool>(Row::math(x, y, y, p)); });
    });
  }

 private:
  ElemParamValues p_;
};

// y = f(base, exponent): the exponent may have another numeric type; the output has the base's.
template <class Row>
class Power final : public Kernel {
 public:
  Power(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &a = io.input(0), &b = io.input(1);
    const Broadcast bc({&a.dims, &b.dims});
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, a.dtype, [&](auto base) {
      using T = typename decltype(base)::type;
      using C = compute_t<T>;
      dispatch(NumericTypes{}, b.dtype, [&](auto exponent) {
        using E = typename decltype(exponent)::type;
        apply_binary(bc, a.as<T>(), b.as<E>(), io.output(0).as<T>(), ctx.threads,
                     [p](C x, compute_t<E> y) { return store<T>(static_cast<C>(Row::math(x, y, y, p))); });
      });
    });
  }

 private:
  ElemParamValues p_;
};

// Any number of inputs of one type: the output starts as input 0 broadcast, then folds in each
// further input with the row's math (Min / Max / Sum).
template <class Row>
class Fold final : public Kernel {
 public:
  Fold(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  // More than two operands fold in the compute type and round once (Sum of three fp16 tensors is
  // one stored result); with two, the result is the binary op's, which fused programs compute.
  size_t infer(KernelIO& io) const override {
    infer_outputs(io);
    return io.in.size() > 2 ? static_cast<size_t>(io.output(0).numel()) * sizeof(double) : 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    View& out = io.output(0);
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      T* o = out.as<T>();
      if (io.in.size() <= 2) {
        {
          const Broadcast bc({&out.dims, &io.input(0).dims});
          apply_binary(bc, o, io.input(0).as<T>(), o, ctx.threads, [](C, C y) { return store<T>(y); });
        }
        for (size_t k = 1; k < io.in.size(); ++k) {
          const Broadcast bc({&out.dims, &io.input(k).dims});
          apply_binary(bc, o, io.input(k).as<T>(), o, ctx.threads,
                       [p](C x, C y) { return store<T>(static_cast<C>(Row::math(x, y, y, p))); });
        }
        return;
      }
      C* acc = static_cast<C*>(io.workspace);
      for (size_t k = 0; k < io.in.size(); ++k) {
        const Broadcast bc({&out.dims, &io.input(k).dims});
        const T* in = io.input(k).as<T>();
        const int64_t stride = bc.inner_stride(1);
        for_each_row(bc, ctx.threads, [&](int64_t at, const int64_t* offs, int64_t n) {
          const T* row = in + offs[1];
          for (int64_t j = 0; j < n; ++j) {
            const C y = load(row[j * stride]);
            acc[at + j] = k == 0 ? y : static_cast<C>(Row::math(acc[at + j], y, y, p));
          }
        });
      }
      const int64_t count = out.numel();
      parallel_for(count, ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = store<T>(acc[i]);
      });
    });
  }

 private:
  ElemParamValues p_;
};

// y = f(condition, x, y): moves elements of any type, so x and y are passed as stored.
template <class Row>
class Select final : public Kernel {
 public:
  Select(const Node& n, int64_t) : p_(elem_param_values(Row::op, n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &c = io.input(0), &x = io.input(1), &y = io.input(2);
    const Broadcast bc({&c.dims, &x.dims, &y.dims});
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool* pc = c.as<bool>();
      const T* px = x.as<T>();
      const T* py = y.as<T>();
      T* po = io.output(0).as<T>();
      const int64_t sc = bc.inner_stride(0), sx = bc.inner_stride(1), sy = bc.inner_stride(2);
      for_each_row(bc, ctx.threads, [&](int64_t o, const int64_t* offs, int64_t n) {
        const bool* rc = pc + offs[0];
        const T* rx = px + offs[1];
        const T* ry = py + offs[2];
        if (Row::op == ElemOp::kWhere && sc == 0 && sx == 1 && sy == 1) {  // one condition for the row
          const T* from = rc[0] ? rx : ry;
          std::copy(from, from + n, po + o);
        } else if (sc == 1 && sx == 1 && sy == 1) {  // unit strides: the loop vectorizes
          for (int64_t i = 0; i < n; ++i) po[o + i] = Row::math(rc[i], rx[i], ry[i], p);
        } else {
          for (int64_t i = 0; i < n; ++i) po[o + i] = Row::math(rc[i * sc], rx[i * sx], ry[i * sy], p);
        }
      });
    });
  }

 private:
  ElemParamValues p_;
};

// y = f(x, min, max): bounds are optional scalar inputs (opset 11+) or float attributes (before,
// whose defaults are the float range, as ONNX's Clip-6 says). An absent bound input is -inf / +inf
// (the type's lowest / largest for integers), as a fused program reads it.
template <class Row>
class Clamp final : public Kernel {
 public:
  Clamp(const Node& n, int64_t opset) : p_(elem_param_values(Row::op, n)) {
    if (opset < 11) {
      attr_min_ = n.attr_float("min", std::numeric_limits<float>::lowest());
      attr_max_ = n.attr_float("max", std::numeric_limits<float>::max());
      attrs_ = true;
    }
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const ElemParamValues p = p_;
    dispatch(types_of<Row::types>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      using Limits = std::numeric_limits<C>;
      C lo = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
      C hi = Limits::has_infinity ? Limits::infinity() : Limits::max();
      if (attrs_) {
        lo = static_cast<C>(std::max<double>(attr_min_, static_cast<double>(Limits::lowest())));
        hi = static_cast<C>(std::min<double>(attr_max_, static_cast<double>(Limits::max())));
      }
      if (io.has_in(1)) lo = load(io.input(1).as<T>()[0]);
      if (io.has_in(2)) hi = load(io.input(2).as<T>()[0]);
      const T* in = x.as<T>();
      T* out = io.output(0).as<T>();
      parallel_for(x.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = store<T>(static_cast<C>(Row::math(load(in[i]), lo, hi, p)));
      });
    });
  }

 private:
  ElemParamValues p_;
  bool attrs_ = false;
  float attr_min_ = 0, attr_max_ = 0;
};

// The kernel of each row's form; nullptr for the rows whose kernels live elsewhere.
template <class Row>
constexpr KernelFactory factory_of() {
  constexpr ElemForm f = Row::form;
  if constexpr (f == ElemForm::kMap) return make_kernel<Map<Row>>;
  else if constexpr (f == ElemForm::kZip) return make_kernel<Zip<Row>>;
  else if constexpr (f == ElemForm::kCompare) return make_kernel<Compare<Row>>;
  else if constexpr (f == ElemForm::kPower) return make_kernel<Power<Row>>;
  else if constexpr (f == ElemForm::kFold) return make_kernel<Fold<Row>>;
  else if constexpr (f == ElemForm::kSelect) return make_kernel<Select<Row>>;
  else if constexpr (f == ElemForm::kClamp) return make_kernel<Clamp<Row>>;
  else return nullptr;  // kCast, kCopy
}

constexpr KernelFactory kFactories[kNumElemOps] = {
    nullptr, nullptr,  // kInput, kConstant
#define AMP_ELEMENTWISE_OP(Name, ...) factory_of<elementwise::Name>(),
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP
};

// The kernel of the row node n is; a node whose variant attribute names no row is refused.
std::unique_ptr<Kernel> make_elementwise_kernel(const Node& n, int64_t opset) {
  if (const std::optional<ElemOp> op = elem_op_of(n)) return kFactories[static_cast<int>(*op)](n, opset);
  std::string values;
  for (ElemOp op : elem_ops_of(n.domain(), n.op_type()))
    values += (values.empty() ? "" : " or ") + std::string(elem_op_info(op).node.variant_value);
  const char* attr = elem_op_info(elem_ops_of(n.domain(), n.op_type()).at(0)).node.variant;
  throw InputError(std::string(attr) + " is '" + n.attr_string(attr, "") + "'; " + n.op_type() + " takes " + values);
}

// One entry per node (op type) of `domain` among the rows with a kernel here.
std::vector<OpEntry> entries_of(std::string_view domain) {
  std::vector<OpEntry> entries;
  for (int k = 0; k < kNumElemOps; ++k) {
    const ElemOpInfo& info = elem_op_info(static_cast<ElemOp>(k));
    if (!kFactories[k] || domain != info.node.domain) continue;
    bool seen = false;
    for (const OpEntry& e : entries) seen = seen || e.op == info.node.op;
    if (seen) continue;
    // A select's input 0 is its bool condition; OpEntry::types checks input 0.
    const uint32_t types = elem_type_mask(info.form == ElemForm::kSelect ? ElemTypes::kBool : info.types);
    entries.push_back(with_shape_rule({info.node.op, make_elementwise_kernel, types, {}}, domain));
  }
  return entries;
}

}  // namespace

const std::vector<OpEntry>& elementwise_ops() {
  static const std::vector<OpEntry> ops = entries_of("");
  return ops;
}

const std::vector<OpEntry>& amp_elementwise_ops() {
  static const std::vector<OpEntry> ops = entries_of(kAmpDomain);
  return ops;
}

}  // namespace amp::cpu
