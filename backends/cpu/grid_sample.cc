// GridSample (opset 16; opset 20's 4-D form arrives here renamed by the importer): Y[n, c, h, w]
// samples X[n, c] at grid[n, h, w] = (x, y), both in [-1, 1] across the map, as PyTorch's
// grid_sample (the reference ONNX's definition follows) computes it: the grid is unnormalized to
// pixel coordinates (align_corners: -1 and 1 are the corner pixels' centres; otherwise their outer
// edges); bilinear and nearest then move the coordinate into the map (padding_mode border: clamp;
// reflection: mirror about the edges, then clamp) and read the 4 neighbours (nearest: the one at
// the coordinate rounded half to even); bicubic reads the 4 x 4 neighbours of the unmoved coordinate
// with A = -0.75 and moves each tap's coordinate instead. A tap outside the map reads 0 (padding
// zeros). 16-bit types compute in fp32 and round once; the grid may be of another float type.
//
// ai.onnx_amp GridSampleGrad(dY, X, grid) -> (dX, dGrid): each dY element, times its taps' weights,
// added into the X elements they read; dGrid the derivative of the weights along the coordinate
// (summed over channels) times the unnormalization's slope and, for bilinear, the padding's (0 where
// border clamps or reflection's clamp holds the coordinate, -1 where reflection mirrors it):
// PyTorch's grid_sampler_2d_backward. Nearest has no dGrid (0). Summed in fp64, rounded once.
// The taps are the forward's (point_taps), so the two cannot disagree.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

struct GridAttrs {
  enum class Mode : uint8_t { kBilinear, kNearest, kBicubic } mode = Mode::kBilinear;
  enum class Padding : uint8_t { kZeros, kBorder, kReflection } padding = Padding::kZeros;
  bool align_corners = false;

  explicit GridAttrs(const Node& n) : align_corners(n.attr_int("align_corners", 0) != 0) {
    const std::string mode = n.attr_string("mode", "bilinear"), pad = n.attr_string("padding_mode", "zeros");
    if (mode == "bilinear") this->mode = Mode::kBilinear;
    else if (mode == "nearest") this->mode = Mode::kNearest;
    else if (mode == "bicubic") this->mode = Mode::kBicubic;
    else throw InputError("GridSample mode '" + mode + "' is not bilinear, nearest or bicubic");
    if (pad == "zeros") padding = Padding::kZeros;
    else if (pad == "border") padding = Padding::kBorder;
    else if (pad == "reflection") padding = Padding::kReflection;
    else throw InputError("GridSample padding_mode '" + pad + "' is not zeros, border or reflection");
  }
};

// The taps of one grid point: up to 16 (position in one H x W map, -1 outside; weight; the
// weight's derivative along the pixel coordinates x and y), and d(pixel coordinate) / d(grid value).
struct Tap {
  int64_t pos = -1;
  double w = 0, dwx = 0, dwy = 0;
};
struct PointTaps {
  Tap taps[16];
  int count = 0;
  double slope_x = 0, slope_y = 0;
};

constexpr double kCubicA = -0.75;  // PyTorch's bicubic (and ONNX's GridSample's)

// Grid value g in [-1, 1] to a pixel coordinate; `slope` gets the derivative.
double unnormalize(double g, int64_t size, bool align_corners, double* slope) {
  const double s = static_cast<double>(size);
  if (align_corners) {
    *slope = (s - 1) / 2;
    return (g + 1) / 2 * (s - 1);
  }
  *slope = s / 2;
  return ((g + 1) * s - 1) / 2;
}

// PyTorch's clip_coordinates_set_grad: the derivative is 0 at and beyond the edges.
double clip(double x, int64_t size, double* slope) {
  const double top = static_cast<double>(size - 1);
  if (x <= 0) {
    *slope = 0;
    return 0;
  }
  if (x >= top) {
    *slope = 0;
    return top;
  }
  *slope = 1;
  return x;
}

// PyTorch's reflect_coordinates_set_grad: x mirrored into [twice_low / 2, twice_high / 2].
double reflect(double x, int64_t twice_low, int64_t twice_high, double* slope) {
  if (twice_low == twice_high) {
    *slope = 0;
    return 0;
  }
  const double low = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  double sign = 1;
  x -= low;
  if (x < 0) {
    sign = -1;
    x = -x;
  }
  const double extra = std::fmod(x, span);
  const int64_t flips = static_cast<int64_t>(std::floor(x / span));
  if (flips % 2 == 0) {
    *slope = sign;
    return extra + low;
  }
  *slope = -sign;
  return span - extra + low;
}

// The padding mode's move of a pixel coordinate into the map (zeros: none); `slope` its derivative.
double pad_coordinate(const GridAttrs& a, double x, int64_t size, double* slope) {
  *slope = 1;
  if (a.padding == GridAttrs::Padding::kZeros) return x;
  double s_reflect = 1, s_clip = 1;
  if (a.padding == GridAttrs::Padding::kReflection)
    x = a.align_corners ? reflect(x, 0, 2 * (size - 1), &s_reflect) : reflect(x, -1, 2 * size - 1, &s_reflect);
  x = clip(x, size, &s_clip);
  *slope = s_reflect * s_clip;
  return x;
}

// PyTorch's safe_downgrade_to_int_range: a coordinate that is not finite or out of int range reads
// nothing (-100 is outside every map).
double in_int_range(double x) {
  return std::isfinite(x) && x < 2147483646.0 && x > -2147483648.0 ? x : -100.0;
}

int64_t position(double x, double y, int64_t height, int64_t width) {
  const int64_t ix = static_cast<int64_t>(x), iy = static_cast<int64_t>(y);
  return ix >= 0 && ix < width && iy >= 0 && iy < height ? iy * width + ix : -1;
}

// Cubic convolution weights of the taps at floor - 1 ... floor + 2 for fraction t, and their
// derivatives along t (PyTorch's get_cubic_upsample_coefficients and its _grad).
void cubic_weights(double t, double w[4], double dw[4]) {
  const double A = kCubicA;
  auto near = [A](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };        // |x| <= 1
  auto far = [A](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };    // 1 < |x| < 2
  auto d_near = [A](double x) { return (3 * (A + 2) * x - 2 * (A + 3)) * x; };
  auto d_far = [A](double x) { return (3 * A * x - 10 * A) * x + 8 * A; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
  dw[0] = d_far(t + 1);
  dw[1] = d_near(t);
  dw[2] = -d_near(1 - t);
  dw[3] = -d_far(2 - t);
}

PointTaps point_taps(const GridAttrs& a, double gx, double gy, int64_t height, int64_t width) {
  PointTaps p;
  double x = unnormalize(gx, width, a.align_corners, &p.slope_x);
  double y = unnormalize(gy, height, a.align_corners, &p.slope_y);
  if (a.mode == GridAttrs::Mode::kBicubic) {
    x = in_int_range(x);
    y = in_int_range(y);
    const double x0 = std::floor(x), y0 = std::floor(y);
    double wx[4], dwx[4], wy[4], dwy[4];
    cubic_weights(x - x0, wx, dwx);
    cubic_weights(y - y0, wy, dwy);
    double unused;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const double tx = in_int_range(pad_coordinate(a, x0 - 1 + j, width, &unused));
        const double ty = in_int_range(pad_coordinate(a, y0 - 1 + i, height, &unused));
        p.taps[p.count++] = Tap{position(tx, ty, height, width), wx[j] * wy[i], dwx[j] * wy[i], wx[j] * dwy[i]};
      }
    return p;
  }
  double pad_x, pad_y;
  x = in_int_range(pad_coordinate(a, x, width, &pad_x));
  y = in_int_range(pad_coordinate(a, y, height, &pad_y));
  p.slope_x *= pad_x;
  p.slope_y *= pad_y;
  if (a.mode == GridAttrs::Mode::kNearest) {
    p.taps[p.count++] = Tap{position(std::nearbyint(x), std::nearbyint(y), height, width), 1, 0, 0};
    p.slope_x = p.slope_y = 0;
    return p;
  }
  const double x0 = std::floor(x), y0 = std::floor(y), x1 = x0 + 1, y1 = y0 + 1;
  const double east = x - x0, west = x1 - x, south = y - y0, north = y1 - y;
  p.taps[p.count++] = Tap{position(x0, y0, height, width), west * north, -north, -west};
  p.taps[p.count++] = Tap{position(x1, y0, height, width), east * north, north, -east};
  p.taps[p.count++] = Tap{position(x0, y1, height, width), west * south, -south, west};
  p.taps[p.count++] = Tap{position(x1, y1, height, width), east * south, south, east};
  return p;
}

// The grid's values (its own float type) in double.
std::vector<double> grid_values(const View& grid) {
  std::vector<double> out(static_cast<size_t>(grid.numel()));
  dispatch(FloatTypes{}, grid.dtype, [&](auto tag) {
    using G = typename decltype(tag)::type;
    const G* g = grid.as<G>();
    for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<double>(load(g[k]));
  });
  return out;
}

// X [N, C, H, W] and grid [N, Ho, Wo, 2]; InputError naming what does not fit.
void check_shapes(const char* op, const View& x, const View& grid) {
  if (x.rank() != 4 || grid.rank() != 4 || grid.dims[3] != 2 || grid.dims[0] != x.dims[0])
    throw InputError(std::string(op) + " takes X [N, C, H, W] and grid [N, H_out, W_out, 2], not " + dims_str(x.dims) +
                     " and " + dims_str(grid.dims));
}

class GridSample final : public Kernel {
 public:
  GridSample(const Node& n, int64_t) : a_(n) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &grid = io.input(1);
    View& out = io.output(0);
    check_shapes("GridSample", x, grid);
    const int64_t n = x.dims[0], channels = x.dims[1], height = x.dims[2], width = x.dims[3];
    const int64_t points = grid.dims[1] * grid.dims[2];
    const std::vector<double> g = grid_values(grid);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* src = x.as<T>();
      T* y = out.as<T>();
      parallel_for(n * points, ctx.threads, 256, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t b = p / points, at = p % points;
          const PointTaps t = point_taps(a_, g[static_cast<size_t>(2 * p)], g[static_cast<size_t>(2 * p + 1)], height, width);
          for (int64_t c = 0; c < channels; ++c) {
            const T* map = src + (b * channels + c) * height * width;
            double acc = 0;
            for (int k = 0; k < t.count; ++k)
              if (t.taps[k].pos >= 0) acc += t.taps[k].w * static_cast<double>(load(map[t.taps[k].pos]));
            y[(b * channels + c) * points + at] = store<T>(static_cast<C>(acc));
          }
        }
      });
    });
  }

 private:
  GridAttrs a_;
};

class GridSampleGrad final : public Kernel {
 public:
  GridSampleGrad(const Node& n, int64_t) : a_(n) {}
  size_t infer(KernelIO& io) const override {
    const View &dy = io.input(0), &x = io.input(1), &grid = io.input(2);
    check_shapes("GridSampleGrad", x, grid);
    if (dy.dims != std::vector<int64_t>{x.dims[0], x.dims[1], grid.dims[1], grid.dims[2]})
      throw InputError("GridSampleGrad dY " + dims_str(dy.dims) + " does not fit X " + dims_str(x.dims) + " and grid " +
                       dims_str(grid.dims));
    if (io.has_out(0)) {
      io.output(0).dtype = x.dtype;
      io.output(0).dims = x.dims;
    }
    if (io.has_out(1)) {
      io.output(1).dtype = grid.dtype;
      io.output(1).dims = grid.dims;
    }
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View &dy = io.input(0), &x = io.input(1), &grid = io.input(2);
    const int64_t n = x.dims[0], channels = x.dims[1], height = x.dims[2], width = x.dims[3];
    const int64_t points = grid.dims[1] * grid.dims[2];
    const std::vector<double> g = grid_values(grid);
    std::vector<double> dx(io.has_out(0) ? static_cast<size_t>(x.numel()) : 0, 0.0);
    std::vector<double> dgrid(static_cast<size_t>(grid.numel()), 0.0);
    dispatch(FloatTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.as<T>();
      const T* d = dy.as<T>();
      for (int64_t p = 0; p < n * points; ++p) {
        const int64_t b = p / points, at = p % points;
        const PointTaps t = point_taps(a_, g[static_cast<size_t>(2 * p)], g[static_cast<size_t>(2 * p + 1)], height, width);
        double gx = 0, gy = 0;
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t map = (b * channels + c) * height * width;
          const double v = static_cast<double>(load(d[(b * channels + c) * points + at]));
          for (int k = 0; k < t.count; ++k) {
            const Tap& tap = t.taps[k];
            if (tap.pos < 0) continue;
            if (!dx.empty()) dx[static_cast<size_t>(map + tap.pos)] += tap.w * v;
            const double value = static_cast<double>(load(src[map + tap.pos]));
            gx += tap.dwx * value * v;
            gy += tap.dwy * value * v;
          }
        }
        dgrid[static_cast<size_t>(2 * p)] = gx * t.slope_x;
        dgrid[static_cast<size_t>(2 * p + 1)] = gy * t.slope_y;
      }
      if (!dx.empty()) {
        T* out = io.output(0).as<T>();
        for (size_t k = 0; k < dx.size(); ++k) out[k] = convert<T>(dx[k]);
      }
    });
    if (io.has_out(1))
      dispatch(FloatTypes{}, grid.dtype, [&](auto tag) {
        using G = typename decltype(tag)::type;
        G* out = io.output(1).as<G>();
        for (size_t k = 0; k < dgrid.size(); ++k) out[k] = convert<G>(dgrid[k]);
      });
  }

 private:
  GridAttrs a_;
};

}  // namespace

const std::vector<OpEntry>& grid_sample_ops() {
  static const std::vector<OpEntry> ops = {{"GridSample", make_kernel<GridSample>, FloatTypes::mask(), {}}};
  return ops;
}

const std::vector<OpEntry>& grad_grid_sample_ops() {
  static const std::vector<OpEntry> ops = {{"GridSampleGrad", make_kernel<GridSampleGrad>, FloatTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
