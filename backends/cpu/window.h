// The sliding-window geometry of Conv and the pools (graph/ops/window.h) as the CPU kernels walk
// it: padded out to three spatial dims.
#pragma once

#include <cstdint>

#include "graph/ops/window.h"

namespace amp::cpu {

// The window padded out to 3 spatial dims (leading dims of extent 1), so the pools and their
// gradients run one 3-D loop nest for 1-D to 3-D inputs.
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  explicit Window3(const Window& w);
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

// Conv's window for X and W dims ([N, C, spatial...], [M, C/group, kernel...]): the kernel is W's,
// InputError when a kernel_shape attribute says otherwise.
Window conv_window(const WindowAttrs& a, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& w_dims);

}  // namespace amp::cpu
