// The elementwise op table (elementwise_ops.inc, one row per op) as the code reads it:
// - ElemOp, the ops of a fused program: the two leaves (an input, a constant) and one per row;
// - elem_op_info(): a row's facts — its ONNX node, arity, form, element types, float attributes
//   and CUDA expression — and elem_op_of(), the row a node is;
// - elementwise::<Name>::math(a, b, c, p): the row's host math as a template. The CPU kernels
//   instantiate it for the compute types of their storage types (backends/cpu/elementwise.cc),
//   the fused programs' evaluator for fp32 (elementwise_program_eval.cc): one expression, the
//   same bits;
// - a row's form decides its CPU kernel and its shape and type rule (shape_rules.cc).
// Cast and Identity are rows so that fused programs can hold them; their CPU kernels convert and
// copy any type (backends/cpu/cast.cc, shape_ops.cc), which on the fused types is what `a` says.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/dtype.h"
#include "graph/gelu.h"
#include "graph/node.h"

namespace amp {

enum class ElemOp : uint8_t {
  kInput,     // a program input, read at this element (broadcast)
  kConstant,  // the immediate `alpha`
#define AMP_ELEMENTWISE_OP(Name, ...) k##Name,
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP
};

inline constexpr int kNumElemOps = 2
#define AMP_ELEMENTWISE_OP(...) +1
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP
    ;

// How an op's operands relate. Decides the CPU kernel that runs it, its shape and type rule, and
// how a node becomes a fused instruction.
enum class ElemForm : uint8_t {
  kLeaf,     // kInput and kConstant: no node
  kMap,      // y = f(x): x's type and shape
  kZip,      // y = f(a, b): a and b of one type, broadcast; that type
  kCompare,  // y = f(a, b): a and b of one type, broadcast; bool
  kPower,    // y = f(base, exponent): the exponent of any numeric type, broadcast; the base's type
  kFold,     // y = f(f(x0, x1), x2) ...: one or more operands of one type, broadcast; that type
  kSelect,   // y = f(condition, x, y): a bool condition, x and y of one type, broadcast; that type
  kClamp,    // y = f(x, min, max): optional scalar bounds of x's type (attributes before opset 11)
  kCast,     // y = x converted to the `to` attribute's type; x's shape
  kCopy,     // y = x
};

// The element types an op's data operands may have (a kSelect op's condition is bool).
enum class ElemTypes : uint8_t { kNone, kFloat, kSigned, kNumeric, kBool, kAll, kPowBase };

// The DTypes of a set, as bits 1 << DType.
constexpr uint32_t elem_type_mask(ElemTypes t) {
  auto bits = [](std::initializer_list<DType> ts) {
    uint32_t m = 0;
    for (DType d : ts) m |= 1u << static_cast<int>(d);
    return m;
  };
  const uint32_t floats = bits({DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble});
  const uint32_t signed_ints = bits({DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64});
  const uint32_t unsigned_ints = bits({DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64});
  const uint32_t boolean = bits({DType::kBool});
  switch (t) {
    case ElemTypes::kNone: return 0;
    case ElemTypes::kFloat: return floats;
    case ElemTypes::kSigned: return floats | signed_ints;
    case ElemTypes::kNumeric: return floats | signed_ints | unsigned_ints;
    case ElemTypes::kBool: return boolean;
    case ElemTypes::kAll: return floats | signed_ints | unsigned_ints | boolean;
    case ElemTypes::kPowBase: return floats | bits({DType::kInt32, DType::kInt64});
  }
  return 0;
}

// A float attribute an op reads (in a fused instruction: alpha, then beta).
struct ElemParam {
  const char* attr = nullptr;
  float fallback = 0;  // ONNX's default
};
struct ElemParams {
  ElemParam alpha, beta;
  int count() const { return (alpha.attr ? 1 : 0) + (beta.attr ? 1 : 0); }
};
// The values a fused instruction or a kernel runs with.
struct ElemParamValues {
  float alpha = 0, beta = 0;
};

// The node an op comes from. `variant` names an attribute whose value selects this row among rows
// of the same node (Gelu's approximate); the row with variant_is_default is the one for a node
// without the attribute.
struct ElemNode {
  const char* op = nullptr;
  const char* domain = "";
  const char* variant = nullptr;
  const char* variant_value = nullptr;
  bool variant_is_default = false;
  bool variant_is_int = false;  // the attribute is an int, variant_value its decimal digits
};

struct ElemOpInfo {
  ElemOp op;
  const char* name;  // as written in programs ("Input" / "Constant" for the leaves)
  ElemNode node;
  int arity;         // operands in a fused instruction
  ElemForm form;
  ElemTypes types;
  ElemParams params;
  const char* cuda;  // the CUDA expression (elementwise_ops.inc)

  bool yields_bool() const { return form == ElemForm::kCompare || (form == ElemForm::kMap && types == ElemTypes::kBool); }
};

const ElemOpInfo& elem_op_info(ElemOp op);
// The op of that name in a program's text (not the leaves).
std::optional<ElemOp> elem_op_from_name(std::string_view name);
// The row node n is, if any (its domain, op type and variant attribute).
std::optional<ElemOp> elem_op_of(const Node& n);
// The rows of one node (domain, op type): one, or one per value of its variant attribute.
std::vector<ElemOp> elem_ops_of(std::string_view domain, std::string_view op_type);
// The parameter values of row `op` for node n: its attributes, or ONNX's defaults.
ElemParamValues elem_param_values(ElemOp op, const Node& n);

// ---- what the table's host math may call besides <cmath> and graph/gelu.h

namespace elementwise {

// |a|: +0 for -0 (as fabs, numpy and PyTorch); unsigned values unchanged.
template <class A>
A magnitude(A a) {
  if constexpr (std::is_floating_point_v<A>) return std::fabs(a);
  else if constexpr (std::is_unsigned_v<A>) return a;
  else return a < 0 ? static_cast<A>(-a) : a;
}

// a / b; integer division by 0 is 0 (numpy's answer) instead of a SIGFPE.
template <class A, class B>
auto divide(A a, B b) {
  if constexpr (std::is_integral_v<A>) return b == 0 ? A(0) : static_cast<A>(a / b);
  else return a / b;
}

// a ** b in the base's type. Integer bases are computed in double (exact for the results an
// integer can hold) and truncated; a float base takes the exponent converted to its type.
template <class A, class B>
A power(A a, B b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  else return std::pow(a, static_cast<A>(b));
}

// v limited to [lo, hi], NaN passing through: max(min(v, hi), lo) as std::max / std::min spell it.
// The CUDA prelude's amp_clamp is the same expression.
template <class V, class L>
V clamp_range(V v, L lo, L hi) {
  return v < lo ? static_cast<V>(lo) : (hi < v ? static_cast<V>(hi) : v);
}

// -1, 0 or 1 in a's type; NaN passes through; unsigned values are 0 or 1.
template <class A>
A sign_of(A a) {
  if constexpr (std::is_floating_point_v<A>) return a != a ? a : (a > 0 ? A(1) : (a < 0 ? A(-1) : A(0)));
  else if constexpr (std::is_unsigned_v<A>) return a > 0 ? A(1) : A(0);
  else return a > 0 ? A(1) : (a < 0 ? A(-1) : A(0));
}

// a mod b with b's sign (Python's %, torch.remainder): C's remainder, moved by b when the signs
// differ. Integer division by 0 gives 0 (numpy's answer), and a signed b of -1 gives 0 (no overflow).
template <class A, class B>
A floor_remainder(A a, B b) {
  if constexpr (std::is_integral_v<A>) {
    const A d = static_cast<A>(b);
    if (d == 0) return A(0);
    if constexpr (std::is_signed_v<A>) {
      if (d == A(-1)) return A(0);
      A r = static_cast<A>(a % d);
      return (r != 0 && ((r < 0) != (d < 0))) ? static_cast<A>(r + d) : r;
    } else {
      return static_cast<A>(a % d);
    }
  } else {
    const A d = static_cast<A>(b);
    const A r = std::fmod(a, d);
    return (r != 0 && ((r < 0) != (d < 0))) ? r + d : r;
  }
}

// a mod b with a's sign (C's fmod, torch.fmod); integer division by 0 gives 0.
template <class A, class B>
A truncated_remainder(A a, B b) {
  if constexpr (std::is_integral_v<A>) {
    const A d = static_cast<A>(b);
    if (d == 0) return A(0);
    if constexpr (std::is_signed_v<A>)
      if (d == A(-1)) return A(0);
    return static_cast<A>(a % d);
  } else {
    return std::fmod(a, static_cast<A>(b));
  }
}

// One struct per row: its op, form and types as constants (for templates), and math(a, b, c, p),
// the row's host math, for any operand types.
#define AMP_ELEMENTWISE_OP(Name, node, arity, form_, types_, params, host_math, cuda)                              \
  struct Name {                                                                                                    \
    static constexpr ElemOp op = ElemOp::k##Name;                                                                  \
    static constexpr ElemForm form = ElemForm::form_;                                                              \
    static constexpr ElemTypes types = ElemTypes::types_;                                                          \
    template <class A, class B, class C>                                                                           \
    static auto math([[maybe_unused]] A a, [[maybe_unused]] B b, [[maybe_unused]] C c,                             \
                     [[maybe_unused]] const ElemParamValues& p) {                                                  \
      return host_math;                                                                                            \
    }                                                                                                              \
  };
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP

// Calls f(Row{}) with the row struct of op (not the leaves).
template <class F>
decltype(auto) visit(ElemOp op, F&& f) {
  switch (op) {
#define AMP_ELEMENTWISE_OP(Name, ...) \
  case ElemOp::k##Name:               \
    return f(Name{});
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP
    default: break;
  }
  throw std::logic_error("elementwise::visit: a leaf has no row");
}

}  // namespace elementwise
}  // namespace amp
