#include "graph/ops/elementwise_program.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "graph/error.h"

namespace amp {
namespace {

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

int ElementwiseProgram::add_input(DType t) {
  ElemInstr in;
  in.op = ElemOp::kInput;
  in.input = static_cast<int>(input_dtypes.size());
  in.dtype = t;
  input_dtypes.push_back(t);
  return add(std::move(in));
}

int ElementwiseProgram::add_op(ElemOp op, std::vector<int> args, DType t) {
  ElemInstr in;
  in.op = op;
  in.args = std::move(args);
  in.dtype = t;
  return add(std::move(in));
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
    if (info.yields_bool() && in.dtype != DType::kBool) throw Error(where + "a comparison or logic op yields bool");
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
    if (in.op == ElemOp::kConstant || elem_op_info(in.op).params.count() >= 1) s << ' ' << hex_float(in.alpha);
    if (elem_op_info(in.op).params.count() == 2) s << ' ' << hex_float(in.beta);
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
      const int numbers = in.op == ElemOp::kConstant ? 1 : elem_op_info(in.op).params.count();
      for (int k = 0; k < numbers; ++k) {
        if (i >= end) parse_error(line_no, std::string(elem_op_info(in.op).name) + " needs " + std::to_string(numbers) +
                                               (numbers == 1 ? " number" : " numbers"));
        (k == 0 ? in.alpha : in.beta) = parse_float(w[i++], line_no);
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
