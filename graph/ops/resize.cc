#include "graph/ops/resize.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"

namespace amp {

ResizeAttrs resize_attrs(const Node& n, int64_t opset) {
  ResizeAttrs a;
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode == "nearest") a.mode = ResizeAttrs::Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") a.mode = ResizeAttrs::Mode::kLinear;
  else if (mode == "cubic") a.mode = ResizeAttrs::Mode::kCubic;
  else throw InputError("Resize mode '" + mode + "' is not supported (nearest, linear and cubic are)");
  // Opset 10's Resize is asymmetric with floor for nearest (as Upsample).
  const std::string coord = opset < 11 ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") a.coord = ResizeAttrs::Coord::kHalfPixel;
  else if (coord == "pytorch_half_pixel") a.coord = ResizeAttrs::Coord::kPytorchHalfPixel;
  else if (coord == "align_corners") a.coord = ResizeAttrs::Coord::kAlignCorners;
  else if (coord == "asymmetric") a.coord = ResizeAttrs::Coord::kAsymmetric;
  else
    throw InputError("Resize coordinate_transformation_mode '" + coord +
                     "' is not supported (half_pixel, pytorch_half_pixel, align_corners and asymmetric are)");
  const std::string nearest = opset < 11 ? "floor" : n.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") a.nearest = ResizeAttrs::Nearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") a.nearest = ResizeAttrs::Nearest::kRoundPreferCeil;
  else if (nearest == "floor") a.nearest = ResizeAttrs::Nearest::kFloor;
  else if (nearest == "ceil") a.nearest = ResizeAttrs::Nearest::kCeil;
  else throw InputError("Resize nearest_mode '" + nearest + "' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil");
  a.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  a.cubic_a = static_cast<double>(n.attr_float("cubic_coeff_a", -0.75f));
  return a;
}

std::vector<int64_t> resize_output_dims(const std::vector<int64_t>& in, const std::vector<float>& scales,
                                        const std::vector<int64_t>& sizes) {
  if (!sizes.empty()) {
    if (sizes.size() != in.size())
      throw InputError("Resize sizes has " + std::to_string(sizes.size()) + " values for a rank-" + std::to_string(in.size()) + " input");
    for (int64_t s : sizes)
      if (s < 0) throw InputError("Resize sizes has a negative size");
    return sizes;
  }
  if (scales.size() != in.size())
    throw InputError("Resize scales has " + std::to_string(scales.size()) + " values for a rank-" + std::to_string(in.size()) +
                     " input (and no sizes are given)");
  std::vector<int64_t> out(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    if (!(scales[a] > 0)) throw InputError("Resize scale " + std::to_string(scales[a]) + " is not positive");
    out[a] = static_cast<int64_t>(std::floor(static_cast<double>(in[a]) * static_cast<double>(scales[a])));
  }
  return out;
}

std::vector<double> resize_inverse_scales(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                          const std::vector<float>& scales) {
  std::vector<double> s(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    if (scales.size() == in.size()) s[a] = 1.0 / static_cast<double>(scales[a]);
    else s[a] = out[a] == 0 ? 1.0 : static_cast<double>(in[a]) / static_cast<double>(out[a]);
  }
  return s;
}

namespace {

// The source coordinate of output index o under the coordinate transformation.
double source_coordinate(const ResizeAttrs& a, int64_t o, int64_t in, int64_t out, double inverse, double resized) {
  const double x = static_cast<double>(o);
  switch (a.coord) {
    case ResizeAttrs::Coord::kHalfPixel: return inverse * (x + 0.5) - 0.5;
    case ResizeAttrs::Coord::kPytorchHalfPixel: return out > 1 ? inverse * (x + 0.5) - 0.5 : 0.0;
    case ResizeAttrs::Coord::kAlignCorners: return out > 1 ? static_cast<double>(in - 1) / (resized - 1) * x : 0.0;
    case ResizeAttrs::Coord::kAsymmetric: return inverse * x;
  }
  return 0;
}

}  // namespace

std::vector<CubicTap> resize_cubic_taps(const ResizeAttrs& a, int64_t in, int64_t out, double inverse, double resized) {
  std::vector<CubicTap> taps(static_cast<size_t>(out));
  if (in == 0) return taps;
  const double A = a.cubic_a;
  auto near = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };      // |d| <= 1
  auto far = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  for (int64_t o = 0; o < out; ++o) {
    const double src = source_coordinate(a, o, in, out, inverse, resized);
    const double fl = std::floor(src), t = src - fl;
    const int64_t first = static_cast<int64_t>(fl) - 1;
    CubicTap& c = taps[static_cast<size_t>(o)];
    const double w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    double kept = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t at = first + k;
      const bool outside = at < 0 || at >= in;
      c.i[k] = std::clamp<int64_t>(at, 0, in - 1);
      c.w[k] = a.exclude_outside && outside ? 0.0 : w[k];
      kept += c.w[k];
    }
    if (a.exclude_outside)
      for (double& v : c.w) v /= kept;
  }
  return taps;
}

std::vector<ResizeTap> resize_taps(const ResizeAttrs& a, int64_t in, int64_t out, double inverse, double resized) {
  std::vector<ResizeTap> taps(static_cast<size_t>(out));
  if (in == 0) return taps;
  for (int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o);
    double src = source_coordinate(a, o, in, out, inverse, resized);
    ResizeTap& t = taps[static_cast<size_t>(o)];
    if (a.mode == ResizeAttrs::Mode::kNearest) {
      // PyTorch's nearest_idx: the same index, then floor(o * scale) in float.
      if (a.coord == ResizeAttrs::Coord::kAsymmetric && a.nearest == ResizeAttrs::Nearest::kFloor) {
        if (in == out) src = x;
        else if (out == 2 * in) src = static_cast<double>(o >> 1);
        else src = static_cast<double>(std::floor(static_cast<float>(o) * static_cast<float>(inverse)));
      }
      double r = 0;
      const double fl = std::floor(src);
      switch (a.nearest) {
        case ResizeAttrs::Nearest::kFloor: r = fl; break;
        case ResizeAttrs::Nearest::kCeil: r = std::ceil(src); break;
        case ResizeAttrs::Nearest::kRoundPreferFloor: r = src == fl + 0.5 ? fl : std::round(src); break;
        case ResizeAttrs::Nearest::kRoundPreferCeil: r = src == fl + 0.5 ? fl + 1 : std::round(src); break;
      }
      t.i0 = t.i1 = std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
      t.w = 0;
      continue;
    }
    src = std::max(src, 0.0);  // PyTorch's area_pixel_compute_source_index clamps below
    const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
    t.i0 = i0;
    t.i1 = std::min<int64_t>(i0 + 1, in - 1);
    t.w = t.i1 == t.i0 ? 0.0 : src - static_cast<double>(i0);
  }
  return taps;
}

}  // namespace amp
