// ONNX Pad's geometry, once for the shape rule, the CPU and CUDA kernels and the gradient: the
// mode, the amounts per axis (from the pads attribute before opset 11, the pads and axes inputs
// from then on) and, per output index along an axis, the input index it reads (or none: the
// constant). Negative amounts crop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/node.h"

namespace amp {

enum class PadMode : uint8_t { kConstant, kReflect, kEdge, kWrap };

// The node's mode attribute; InputError for a mode ONNX does not define.
PadMode pad_mode(const Node& n);
const char* pad_mode_name(PadMode m);

// Begin and end amounts of every axis of a rank-`rank` input: ONNX's pads list [x1_begin, x2_begin,
// ..., x1_end, x2_end, ...] over `axes` (all axes when empty; negative axes count from the end).
// InputError when the lengths do not fit.
struct PadAmounts {
  std::vector<int64_t> begin, end;
};
PadAmounts pad_amounts(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes, size_t rank);

// The output dims; InputError when an axis would become negative, or when reflect / edge / wrap
// need input elements an empty axis does not have.
std::vector<int64_t> padded_dims(const std::vector<int64_t>& in, const PadAmounts& p, PadMode mode);

// The input index output index `o` of an axis of extent `dim` reads, or -1 for the constant.
// reflect mirrors without repeating the edge (numpy's "reflect", PyTorch's reflection padding),
// edge repeats it, wrap goes round.
inline int64_t pad_source(int64_t o, int64_t dim, int64_t begin, PadMode mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : dim - 1;
    case PadMode::kWrap: return ((i % dim) + dim) % dim;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      i = ((i % period) + period) % period;
      return i < dim ? i : period - i;
    }
  }
  return -1;
}

}  // namespace amp
