#include "graph/ops/elementwise_ops.h"

#include <string>

namespace amp {
namespace {

// The row's columns (elementwise_ops.inc) as the table writes them.
constexpr ElemNode onnx(const char* op) { return ElemNode{op, "", nullptr, nullptr, false}; }
constexpr ElemNode amp_variant(const char* op, const char* attr, const char* value, bool is_default) {
  return ElemNode{op, kAmpDomain, attr, value, is_default};
}
constexpr ElemNode onnx_variant(const char* op, const char* attr, const char* value, bool is_default) {
  return ElemNode{op, "", attr, value, is_default, true};
}
constexpr ElemParams no_params() { return {}; }
constexpr ElemParams params(const char* alpha, float alpha_default) { return {{alpha, alpha_default}, {}}; }
constexpr ElemParams params(const char* alpha, float alpha_default, const char* beta, float beta_default) {
  return {{alpha, alpha_default}, {beta, beta_default}};
}

constexpr bool contains(const char* s, const char* word) {
  for (; *s; ++s) {
    size_t i = 0;
    while (word[i] && s[i] == word[i]) ++i;
    if (!word[i]) return true;
  }
  return false;
}

constexpr int arity_of(ElemForm f) {
  switch (f) {
    case ElemForm::kLeaf: return 0;
    case ElemForm::kMap: case ElemForm::kCast: case ElemForm::kCopy: return 1;
    case ElemForm::kZip: case ElemForm::kCompare: case ElemForm::kPower: case ElemForm::kFold: return 2;
    case ElemForm::kSelect: case ElemForm::kClamp: return 3;
  }
  return -1;
}

// What a row must say; checked for every row at compile time (the error names the row).
constexpr bool row_is_complete(const ElemOpInfo& r) {
  const bool variant_all_or_none = (r.node.variant == nullptr) == (r.node.variant_value == nullptr);
  // A bool operand is 0 or 1 in a fused program's fp32 registers: only maps and comparisons take them.
  const bool bool_fits = r.types != ElemTypes::kBool || r.form == ElemForm::kMap || r.form == ElemForm::kCompare;
  return r.node.op && r.node.op[0] && variant_all_or_none && r.arity == arity_of(r.form) && r.types != ElemTypes::kNone &&
         bool_fits && r.cuda && contains(r.cuda, "{a}") && contains(r.cuda, "{b}") == (r.arity >= 2) &&
         contains(r.cuda, "{c}") == (r.arity >= 3) && contains(r.cuda, "{alpha}") == (r.params.alpha.attr != nullptr) &&
         contains(r.cuda, "{beta}") == (r.params.beta.attr != nullptr) && (r.params.beta.attr == nullptr || r.params.alpha.attr);
}

#define AMP_ELEMENTWISE_OP(Name, node, arity, form, types, params_, host_math, cuda)                            \
  static_assert(row_is_complete(ElemOpInfo{ElemOp::k##Name, #Name, node, arity, ElemForm::form, ElemTypes::types, \
                                           params_, cuda}),                                                     \
                "graph/ops/elementwise_ops.inc: row " #Name                                                     \
                " is incomplete: its arity must fit its form, its CUDA expression must use {a} to {c} as the "  \
                "arity says and {alpha} / {beta} as the params say");
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP

// Indexed by ElemOp.
constexpr ElemOpInfo kElemOps[] = {
    {ElemOp::kInput, "Input", {}, 0, ElemForm::kLeaf, ElemTypes::kNone, {}, nullptr},
    {ElemOp::kConstant, "Constant", {}, 0, ElemForm::kLeaf, ElemTypes::kNone, {}, nullptr},
#define AMP_ELEMENTWISE_OP(Name, node, arity, form, types, params_, host_math, cuda) \
  {ElemOp::k##Name, #Name, node, arity, ElemForm::form, ElemTypes::types, params_, cuda},
#include "graph/ops/elementwise_ops.inc"
#undef AMP_ELEMENTWISE_OP
};
static_assert(sizeof(kElemOps) / sizeof(kElemOps[0]) == kNumElemOps, "one row per ElemOp");

bool same(const char* a, std::string_view b) { return a && b == a; }

}  // namespace

const ElemOpInfo& elem_op_info(ElemOp op) { return kElemOps[static_cast<int>(op)]; }

std::optional<ElemOp> elem_op_from_name(std::string_view name) {
  for (const ElemOpInfo& info : kElemOps)
    if (info.form != ElemForm::kLeaf && name == info.name) return info.op;
  return std::nullopt;
}

std::vector<ElemOp> elem_ops_of(std::string_view domain, std::string_view op_type) {
  std::vector<ElemOp> rows;
  for (const ElemOpInfo& info : kElemOps)
    if (info.form != ElemForm::kLeaf && same(info.node.op, op_type) && domain == info.node.domain) rows.push_back(info.op);
  return rows;
}

std::optional<ElemOp> elem_op_of(const Node& n) {
  for (ElemOp op : elem_ops_of(n.domain(), n.op_type())) {
    const ElemNode& node = elem_op_info(op).node;
    if (!node.variant) return op;
    const Attribute* a = n.attr(node.variant);
    if (!a) {
      if (node.variant_is_default) return op;
      continue;
    }
    if (node.variant_is_int ? a->kind == AttrKind::kInt && std::to_string(a->i) == node.variant_value
                            : a->kind == AttrKind::kString && a->s == node.variant_value)
      return op;
  }
  return std::nullopt;
}

ElemParamValues elem_param_values(ElemOp op, const Node& n) {
  const ElemParams& p = elem_op_info(op).params;
  ElemParamValues v;
  if (p.alpha.attr) v.alpha = n.attr_float(p.alpha.attr, p.alpha.fallback);
  if (p.beta.attr) v.beta = n.attr_float(p.beta.attr, p.beta.fallback);
  return v;
}

}  // namespace amp
