// ONNX Resize's geometry (opsets 10 to 17), once for the shape rule, the CPU kernel and its
// gradient: the output dims from scales or sizes, and per output index along an axis the input
// indices it reads with their weights — nearest (the four nearest_modes), linear and cubic, under the
// coordinate transformations PyTorch exports (asymmetric for nearest, pytorch_half_pixel for
// bilinear, align_corners for align_corners=True) and half_pixel. Linear interpolation clamps the
// source coordinate into the input as PyTorch's upsample kernels do (ONNX's edge padding gives the
// same values, with or without exclude_outside). Cubic reads the 4 inputs around the source
// coordinate with ONNX's cubic convolution (cubic_coeff_a), an index outside the input reading the
// edge (ONNX's edge padding, PyTorch's bicubic bounds) or, with exclude_outside, nothing (the other
// weights renormalized). tf_crop_and_resize is refused with an InputError naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/node.h"

namespace amp {

struct ResizeAttrs {
  enum class Mode : uint8_t { kNearest, kLinear, kCubic } mode = Mode::kNearest;
  enum class Coord : uint8_t { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric } coord = Coord::kHalfPixel;
  enum class Nearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil } nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;        // cubic_coeff_a
  bool exclude_outside = false;  // changes cubic only (linear's outside tap reads the edge it renormalizes to)
};
// The node's attributes; InputError for modes this project does not run.
ResizeAttrs resize_attrs(const Node& n, int64_t opset);

// Output dims of an input of dims `in` from sizes (when non-empty) or scales. InputError when the
// lengths do not match the rank or a scale is not positive.
std::vector<int64_t> resize_output_dims(const std::vector<int64_t>& in, const std::vector<float>& scales,
                                        const std::vector<int64_t>& sizes);

// One output index along an axis: it reads input i0 with weight 1 - w and i1 with weight w.
struct ResizeTap {
  int64_t i0 = 0, i1 = 0;
  double w = 0;
};
// The taps of every output index of one axis. `inverse` is input over output: 1 / scale when
// scales were given, in / out when sizes were — PyTorch's area_pixel_compute_scale, whose
// operations (in double; nearest's index in float, as its nearest_idx) these follow.
// `resized` is the output length align_corners divides by: out, or in * scale unfloored when
// scales were given (ONNX's reference; the same for the integer scales PyTorch exports).
std::vector<ResizeTap> resize_taps(const ResizeAttrs& a, int64_t in, int64_t out, double inverse, double resized);

// Cubic (mode cubic): output index o reads inputs i[k] with weights w[k], k = 0..3, the inputs at
// floor(x) - 1 ... floor(x) + 2 of its source coordinate x clamped into the axis (exclude_outside:
// those outside weigh 0 and the others are divided by their sum). Same arguments as resize_taps.
struct CubicTap {
  int64_t i[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};
std::vector<CubicTap> resize_cubic_taps(const ResizeAttrs& a, int64_t in, int64_t out, double inverse, double resized);

// The inverse scale of each axis: 1 / scales[a] when scales are given, else in / out.
std::vector<double> resize_inverse_scales(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                          const std::vector<float>& scales);

}  // namespace amp
