// The program of one fused elementwise group: a straight-line list of instructions over the group's
// inputs, each an elementwise op whose result is stored (and so rounded) in the type the unfused
// graph gave that value. Evaluated per element of one broadcast iteration space, in fp32 registers.
//
// Why every instruction keeps its graph type: fusion must not change results. An unfused fp16 graph
// rounds after every op (each kernel writes fp16), so the fused kernel rounds at the same places;
// Casts become nothing but a change of that type. The fused graph then matches the unfused one
// bit for bit on the same math library, and the CPU backend stays the reference for both.
//
// The program is device-independent: the CUDA backend generates a kernel from it, and
// evaluate_elementwise_program (elementwise_program_eval.h) runs it on the host. Its ops are the
// rows of the elementwise op table (elementwise_ops.h). In a graph it travels as the "program"
// string attribute of an ai.onnx_amp FusedElementwise node (to_text/parse).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/amp_ops.h"
#include "graph/dtype.h"
#include "graph/node.h"
#include "graph/ops/elementwise_ops.h"

namespace amp {

inline constexpr const char* kFusedElementwiseOp = "FusedElementwise";  // in kAmpDomain

// Element types a fused kernel reads, computes through and writes.
bool is_fusable_dtype(DType t);

struct ElemInstr {
  ElemOp op = ElemOp::kIdentity;
  std::vector<int> args;  // indices of earlier instructions
  DType dtype = DType::kFloat;  // the result is rounded to this type
  float alpha = 0;  // kConstant: the value; else the op's first float attribute (LeakyRelu's slope)
  float beta = 0;   // the op's second float attribute
  int input = -1;   // kInput: the group input read
};

struct ElementwiseProgram {
  std::vector<DType> input_dtypes;
  std::vector<ElemInstr> instrs;
  std::vector<int> outputs;  // instruction indices, one per group output
  // Inlined constants still take part in broadcasting: a [1,1] constant makes a [3] input's
  // result [1,3]. The iteration space has at least this rank.
  int min_rank = 0;

  std::vector<DType> output_dtypes() const;
  // Appends an instruction and returns its index.
  int add(ElemInstr instr);
  // Appends a new program input of type t (the next input_dtypes entry) and the instruction that
  // reads it; returns the instruction's index.
  int add_input(DType t);
  // Appends `op` of `args` (instruction indices) rounded to t; returns its index.
  int add_op(ElemOp op, std::vector<int> args, DType t);
  // Throws Error naming the instruction when arguments, arities or types do not fit.
  void check() const;

  // One instruction per line, e.g. "%3 = Mul %1 %2 : float16"; lossless (constants as hex floats).
  std::string to_text() const;
  // Inverse of to_text; throws InputError naming the line for anything malformed.
  static ElementwiseProgram parse(std::string_view text);
};

}  // namespace amp
