// Sliding-window geometry of Conv and the pools: kernel, strides, dilations and pads per spatial
// dim, with ONNX's auto_pad rules (SAME_UPPER puts the odd pad at the end, SAME_LOWER at the
// start) and the pools' ceil_mode. The shape rules (output extents) and the CPU kernels (where
// each window reads) both resolve windows here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/node.h"

namespace amp {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  std::vector<int64_t> in, out;  // spatial extents
};

struct WindowAttrs {
  std::string auto_pad;
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode = false;
  explicit WindowAttrs(const Node& n);
};

// Resolves the window for spatial input extents `in` (kernel from the attributes, or `kernel`
// when given, e.g. Conv's weight shape). InputError when the window does not fit.
Window make_window(const WindowAttrs& a, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel);

}  // namespace amp
