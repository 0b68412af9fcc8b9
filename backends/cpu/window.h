// Sliding-window geometry shared by Conv and the pools: kernel, strides, dilations and pads per
// spatial dim, with ONNX's auto_pad rules (SAME_UPPER puts the odd pad at the end, SAME_LOWER at
// the start) and the pools' ceil_mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/node.h"

namespace amp::cpu {

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

// The window padded out to 3 spatial dims (leading dims of extent 1), so the pools and their
// gradients run one 3-D loop nest for 1-D to 3-D inputs.
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  explicit Window3(const Window& w);
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

}  // namespace amp::cpu
