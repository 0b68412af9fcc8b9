#include "graph/ops/elementwise_program.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "graph/error.h"
#include "graph/gelu.h"

namespace amp {
namespace {

// Indexed by ElemOp; the order must follow the enum (checked by elem_op_info).
constexpr ElemOpInfo kElemOps[] = {
    {ElemOp::kInput, "Input", 0},
    {ElemOp::kConstant, "Constant", 0},
    {ElemOp::kIdentity, "Identity", 1},
    {ElemOp::kCast, "Cast", 1},
    {ElemOp::kNeg, "Neg", 1},
    {ElemOp::kAbs, "Abs", 1},
    {ElemOp::kExp, "Exp", 1},
    {ElemOp::kLog, "Log", 1},
    {ElemOp::kSqrt, "Sqrt", 1},
    {ElemOp::kReciprocal, "Reciprocal", 1},
    {ElemOp::kSigmoid, "Sigmoid", 1},
    {ElemOp::kTanh, "Tanh", 1},
    {ElemOp::kRelu, "Relu", 1},
    {ElemOp::kErf, "Erf", 1},
    {ElemOp::kFloor, "Floor", 1},
    {ElemOp::kCeil, "Ceil", 1},
    {ElemOp::kNot, "Not", 1},
    {ElemOp::kLeakyRelu, "LeakyRelu", 1},
    {ElemOp::kGelu, "Gelu", 1},
    {ElemOp::kGeluTanh, "GeluTanh", 1},
    {ElemOp::kAdd, "Add", 2},
    {ElemOp::kSub, "Sub", 2},
    {ElemOp::kMul, "Mul", 2},
    {ElemOp::kDiv, "Div", 2},
    {ElemOp::kPow, "Pow", 2},
    {ElemOp::kMax, "Max", 2},
    {ElemOp::kMin, "Min", 2},
    {ElemOp::kEqual, "Equal", 2},
    {ElemOp::kLess, "Less", 2},
    {ElemOp::kLessOrEqual, "LessOrEqual", 2},
    {ElemOp::kGreater, "Greater", 2},
    {ElemOp::kGreaterOrEqual, "GreaterOrEqual", 2},
    {ElemOp::kAnd, "And", 2},
    {ElemOp::kOr, "Or", 2},
    {ElemOp::kXor, "Xor", 2},
    {ElemOp::kGeluGrad, "GeluGrad", 2},
    {ElemOp::kGeluTanhGrad, "GeluTanhGrad", 2},
    {ElemOp::kWhere, "Where", 3},
    {ElemOp::kClip, "Clip", 3},
};
static_assert(sizeof(kElemOps) / sizeof(kElemOps[0]) == kNumElemOps, "one table row per ElemOp");

bool yields_bool(ElemOp op) {
  switch (op) {
    case ElemOp::kNot: case ElemOp::kEqual: case ElemOp::kLess: case ElemOp::kLessOrEqual:
    case ElemOp::kGreater: case ElemOp::kGreaterOrEqual: case ElemOp::kAnd: case ElemOp::kOr:
    case ElemOp::kXor:
      return true;
    default:
      return false;
  }
}

std::string hex_float(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  return buf;
}

[[noreturn]] void parse_error(size_t line, const std::string& what) {
  throw InputError("FusedElementwise program, line " + std::to_string(line) + ": " + what);
}

DType parse_dtype(const std::string& word, size_t line) {
  auto t = dtype_from_name(word);
  if (!t || !is_fusable_dtype(*t)) parse_error(line, "'" + word + "' is not a fusable element type");
  return *t;
}

float parse_float(const std::string& word, size_t line) {
  char* end = nullptr;
  const float f = std::strtof(word.c_str(), &end);
  if (word.empty() || *end) parse_error(line, "'" + word + "' is not a number");
  return f;
}

int parse_ref(const std::string& word, size_t line) {
  if (word.size() < 2 || word[0] != '%') parse_error(line, "expected %<index>, got '" + word + "'");
  char* end = nullptr;
  const long v = std::strtol(word.c_str() + 1, &end, 10);
  if (*end || v < 0) parse_error(line, "expected %<index>, got '" + word + "'");
  return static_cast<int>(v);
}

}  // namespace

const ElemOpInfo& elem_op_info(ElemOp op) {
  const ElemOpInfo& info = kElemOps[static_cast<int>(op)];
  if (info.op != op) throw Error("internal: kElemOps is out of order at " + std::string(info.name));
  return info;
}

std::optional<ElemOp> elem_op_from_name(std::string_view name) {
  for (const ElemOpInfo& info : kElemOps)
    if (info.arity > 0 && name == info.name) return info.op;
  return std::nullopt;
}

std::optional<ElemOp> elem_op_of(const Node& n) {
  if (n.domain() == kAmpDomain && (n.op_type() == "Gelu" || n.op_type() == "GeluGrad")) {
    const std::optional<GeluKind> kind = gelu_kind(n.attr_string("approximate", "none"));
    if (!kind) return std::nullopt;
    const bool tanh = *kind == GeluKind::kTanh;
    if (n.op_type() == "Gelu") return tanh ? ElemOp::kGeluTanh : ElemOp::kGelu;
    return tanh ? ElemOp::kGeluTanhGrad : ElemOp::kGeluGrad;
  }
  if (!n.domain().empty()) return std::nullopt;
  const std::optional<ElemOp> op = elem_op_from_name(n.op_type());
  switch (op.value_or(ElemOp::kIdentity)) {
    case ElemOp::kGelu: case ElemOp::kGeluTanh: case ElemOp::kGeluGrad: case ElemOp::kGeluTanhGrad:
      return std::nullopt;  // the project's own ops, not ONNX's
    default:
      return op;
  }
}

bool is_fusable_dtype(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kBool;
}

std::vector<DType> ElementwiseProgram::output_dtypes() const {
  std::vector<DType> out;
  for (int i : outputs) out.push_back(instrs.at(static_cast<size_t>(i)).dtype);
  return out;
}

int ElementwiseProgram::add(ElemInstr instr) {
  instrs.push_back(std::move(instr));
  return static_cast<int>(instrs.size()) - 1;
}

void ElementwiseProgram::check() const {
  for (size_t k = 0; k < instrs.size(); ++k) {
    const ElemInstr& in = instrs[k];
    const ElemOpInfo& info = elem_op_info(in.op);
    const std::string where = "fused program %" + std::to_string(k) + " (" + info.name + "): ";
    if (static_cast<int>(in.args.size()) != info.arity)
      throw Error(where + "takes " + std::to_string(info.arity) + " arguments, has " + std::to_string(in.args.size()));
    for (int a : in.args)
      if (a < 0 || static_cast<size_t>(a) >= k) throw Error(where + "argument %" + std::to_string(a) + " is not earlier");
    if (!is_fusable_dtype(in.dtype)) throw Error(where + "type " + std::string(dtype_name(in.dtype)) + " is not fusable");
    if (yields_bool(in.op) && in.dtype != DType::kBool) throw Error(where + "a comparison or logic op yields bool");
    if (in.op == ElemOp::kInput) {
      if (in.input < 0 || static_cast<size_t>(in.input) >= input_dtypes.size())
        throw Error(where + "reads input " + std::to_string(in.input) + " of " + std::to_string(input_dtypes.size()));
      if (input_dtypes[static_cast<size_t>(in.input)] != in.dtype) throw Error(where + "type differs from the input's");
    }
  }
  if (outputs.empty()) throw Error("fused program has no outputs");
  for (int o : outputs)
    if (o < 0 || static_cast<size_t>(o) >= instrs.size()) throw Error("fused program returns unknown %" + std::to_string(o));
}

std::string ElementwiseProgram::to_text() const {
  std::ostringstream s;
  s << "inputs";
  for (DType t : input_dtypes) s << ' ' << dtype_name(t);
  s << "\nmin_rank " << min_rank << '\n';
  for (size_t k = 0; k < instrs.size(); ++k) {
    const ElemInstr& in = instrs[k];
    s << '%' << k << " = " << elem_op_info(in.op).name;
    if (in.op == ElemOp::kInput) s << ' ' << in.input;
    for (int a : in.args) s << " %" << a;
    if (in.op == ElemOp::kConstant || in.op == ElemOp::kLeakyRelu) s << ' ' << hex_float(in.alpha);
    s << " : " << dtype_name(in.dtype) << '\n';
  }
  s << "return";
  for (int o : outputs) s << " %" << o;
  s << '\n';
  return s.str();
}

ElementwiseProgram ElementwiseProgram::parse(std::string_view text) {
  ElementwiseProgram p;
  std::istringstream lines{std::string(text)};
  std::string line;
  size_t line_no = 0;
  bool returned = false;
  while (std::getline(lines, line)) {
    ++line_no;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    if (returned) parse_error(line_no, "text after 'return'");
    if (w[0] == "inputs") {
      for (size_t i = 1; i < w.size(); ++i) p.input_dtypes.push_back(parse_dtype(w[i], line_no));
    } else if (w[0] == "min_rank" && w.size() == 2) {
      p.min_rank = static_cast<int>(parse_float(w[1], line_no));
    } else if (w[0] == "return") {
      for (size_t i = 1; i < w.size(); ++i) p.outputs.push_back(parse_ref(w[i], line_no));
      returned = true;
    } else {
      // %k = Op [input] [%a ...] [literal] : dtype
      if (w.size() < 5 || w[1] != "=" || w[w.size() - 2] != ":") parse_error(line_no, "expected '%k = Op ... : type'");
      if (parse_ref(w[0], line_no) != static_cast<int>(p.instrs.size()))
        parse_error(line_no, "instructions must be numbered in order");
      auto op = elem_op_from_name(w[2]);
      if (!op && w[2] == "Input") op = ElemOp::kInput;
      if (!op && w[2] == "Constant") op = ElemOp::kConstant;
      if (!op) parse_error(line_no, "unknown op '" + w[2] + "'");
      ElemInstr in;
      in.op = *op;
      in.dtype = parse_dtype(w.back(), line_no);
      size_t i = 3;
      const size_t end = w.size() - 2;
      if (in.op == ElemOp::kInput) {
        if (i >= end) parse_error(line_no, "Input needs an input number");
        in.input = static_cast<int>(parse_float(w[i++], line_no));
      }
      while (i < end && w[i][0] == '%') in.args.push_back(parse_ref(w[i++], line_no));
      if (in.op == ElemOp::kConstant || in.op == ElemOp::kLeakyRelu) {
        if (i >= end) parse_error(line_no, std::string(elem_op_info(in.op).name) + " needs a number");
        in.alpha = parse_float(w[i++], line_no);
      }
      if (i != end) parse_error(line_no, "unexpected '" + w[i] + "'");
      p.instrs.push_back(std::move(in));
    }
  }
  if (!returned) parse_error(line_no, "missing 'return'");
  try {
    p.check();
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(std::string("FusedElementwise program: ") + e.what());
  }
  return p;
}

}  // namespace amp
