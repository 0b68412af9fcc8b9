// How ScatterND and ScatterElements combine an update with what is there (their `reduction`):
// none, add, mul (opset 16) and, in their opset-18 form (the ai.onnx_amp ops the import carries a
// node with max or min into), max and min. Read once when the kernel is made, not per element.
#pragma once

#include <string>
#include <type_traits>

#include "backends/cpu/numeric.h"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/node.h"

namespace amp::cpu {

// In this order: the CUDA kernels take the value (backends/cuda/scatter_combine.cuh: 0 none ... 4 min).
enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

// The node's reduction; InputError naming its op for an unknown one, and for max or min on a node
// of the default domain (opset 17 and before have no max or min: the import moved any newer node
// with one into ai.onnx_amp).
inline ScatterReduction scatter_reduction(const Node& n) {
  const std::string reduction = n.attr_string("reduction", "none");
  const bool opset18 = n.domain() == kAmpDomain;
  if (reduction == "none") return ScatterReduction::kNone;
  if (reduction == "add") return ScatterReduction::kAdd;
  if (reduction == "mul") return ScatterReduction::kMul;
  if (opset18 && reduction == "max") return ScatterReduction::kMax;
  if (opset18 && reduction == "min") return ScatterReduction::kMin;
  if (reduction == "max" || reduction == "min")
    throw InputError(n.op_type() + " reduction '" + reduction +
                     "' came with opset 18 (opsets 16 and 17 have none, add and mul)");
  throw InputError(n.op_type() + " reduction '" + reduction + "' is not supported (none, add, mul, max and min are)");
}

// dst combined with v (16-bit types in fp32, rounded once; bool as or / and for add / mul and for
// max / min). Max and min take a NaN from either side, as numpy's maximum / minimum (ONNX's
// reference) and PyTorch's scatter_reduce amax / amin do.
template <class T>
void scatter_combine(T& dst, const T& v, ScatterReduction r) {
  if constexpr (std::is_same_v<T, bool>) {
    const bool any = r == ScatterReduction::kAdd || r == ScatterReduction::kMax;
    const bool all = r == ScatterReduction::kMul || r == ScatterReduction::kMin;
    dst = any ? (dst || v) : all ? (dst && v) : v;
  } else {
    const auto a = load(dst), b = load(v);
    switch (r) {
      case ScatterReduction::kNone: dst = v; break;
      case ScatterReduction::kAdd: dst = store<T>(a + b); break;
      case ScatterReduction::kMul: dst = store<T>(a * b); break;
      // b != b: b is NaN (never, for integers); a NaN dst stays, as no comparison picks b over it.
      case ScatterReduction::kMax: dst = (b > a || b != b) ? v : dst; break;
      case ScatterReduction::kMin: dst = (b < a || b != b) ? v : dst; break;
    }
  }
}

}  // namespace amp::cpu
