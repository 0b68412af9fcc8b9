// Host evaluation of a fused elementwise program: the reference for the generated CUDA kernels and
// the way a CPU backend runs a FusedElementwise node. Every element is computed the way the kernel
// computes it: inputs widened to fp32, each instruction in fp32, its result rounded to the
// instruction's type (fp16/bf16 round to nearest even, bool to 0/1), outputs stored in their type.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/dtype.h"
#include "graph/ops/elementwise_program.h"
#include "graph/tensor.h"

namespace amp {

// ONNX multidirectional (numpy) broadcasting of the shapes, at least min_rank dims.
// Throws InputError naming `who` when two dims disagree.
std::vector<int64_t> broadcast_shape(const std::vector<std::vector<int64_t>>& shapes, int min_rank, const std::string& who);
// Element strides of a row-major tensor of shape `in` read over the iteration space `out`:
// one stride per dim of `out`, 0 where the input is broadcast (missing or size-1 dim).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// The op's fp32 result for already rounded arguments, before rounding to the result type: the
// row's host math (elementwise_ops.inc) at fp32, as the CPU kernels compute fp32 and 16-bit data.
float apply_elem_op(const ElemInstr& in, const float* args);
// v as stored in t and read back: fp16/bf16 rounded to nearest even, bool 0 or 1.
float round_to_dtype(float v, DType t);

// Runs the program over the broadcast of its inputs; returns one tensor per program output.
// Throws InputError naming `who` for inputs of the wrong count or type or shapes that do not broadcast.
std::vector<Tensor> evaluate_elementwise_program(const ElementwiseProgram& p, const std::vector<const Tensor*>& inputs,
                                                 const std::string& who);

}  // namespace amp
