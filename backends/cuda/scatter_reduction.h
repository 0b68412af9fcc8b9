// The reduction of a ScatterElements or ScatterND node as the device kernels take it
// (scatter_combine.cuh): none 0, add 1, mul 2 and, in the opset-18 form the import carries into
// ai.onnx_amp (graph/onnx_newer_opsets.h), max 3 and min 4.
#pragma once

#include <string>

#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/node.h"

namespace amp::cuda {

inline int scatter_reduction_code(const Node& n) {
  const std::string r = n.attr_string("reduction", "none");
  const bool opset18 = n.domain() == kAmpDomain;
  if (r == "none") return 0;
  if (r == "add") return 1;
  if (r == "mul") return 2;
  if (opset18 && r == "max") return 3;
  if (opset18 && r == "min") return 4;
  throw InputError(n.op_type() + " reduction '" + r + "' is not supported (none, add and mul are; max and min " +
                   "from opset 18)");
}

}  // namespace amp::cuda
