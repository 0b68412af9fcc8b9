// The reduction of a ScatterElements or ScatterND node as the device kernels take it
// (scatter_combine.cuh): the CPU's reading of it (backends/cpu/scatter_reduction.h: none, add, mul
// and, in the opset-18 form the import carries into ai.onnx_amp, max and min) as its enum's value,
// 0 to 4.
#pragma once

#include "backends/cpu/scatter_reduction.h"
#include "graph/node.h"

namespace amp::cuda {

inline int scatter_reduction_code(const Node& n) { return static_cast<int>(cpu::scatter_reduction(n)); }

}  // namespace amp::cuda
