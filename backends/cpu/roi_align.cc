// RoiAlign (opset 16): for each region of interest [x1, y1, x2, y2] (times spatial_scale, shifted
// by half a pixel with coordinate_transformation_mode half_pixel, the default) on its batch
// entry's feature map, an output_height x output_width grid of bins, each the average (mode avg) or
// the largest (mode max) of sampling_ratio² bilinear samples (0: ceil(bin size) per side), as
// ONNX Runtime computes it: out-of-map samples count as zero, and mode max takes the largest of the
// four weighted corner terms of each sample. 16-bit types are computed in fp32 and rounded once.
//
// ai.onnx_amp RoiAlignGrad(dY, rois, batch_indices, shape): the gradient of X, a tensor of `shape`.
// Mode avg: each dY element, divided by its bin's sample count, goes to the four corners of each
// sample with the corner's bilinear weight; mode max: to the one weighted corner term the forward
// took (the first of equal ones, as its running max keeps). Summed in double, rounded once. The
// regions, batch indices and taps are the forward's (roi_geometry), so the two cannot disagree.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

struct RoiAttrs {
  explicit RoiAttrs(const Node& n)
      : max(n.attr_string("mode", "avg") == "max"),
        half_pixel(n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel"),
        ratio(n.attr_int("sampling_ratio", 0)),
        scale(n.attr_float("spatial_scale", 1.0f)) {
    const std::string mode = n.attr_string("mode", "avg"), ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
    if (mode != "avg" && mode != "max") throw InputError("RoiAlign mode '" + mode + "' is not avg or max");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      throw InputError("RoiAlign coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
    if (ratio < 0) throw InputError("RoiAlign sampling_ratio must not be negative");
  }
  bool max, half_pixel;
  int64_t ratio;
  float scale;
};

Sample tap(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low), hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// One region on its batch entry's map: the bilinear taps of every sample of every bin, bin-major.
struct RoiGeometry {
  int64_t batch = 0, per_bin = 1;
  double samples = 1;  // the divisor of mode avg
  std::vector<Sample> taps;
};

template <class T>
RoiGeometry roi_geometry(const RoiAttrs& a, const T* boxes, int64_t r, int64_t b, int64_t n, int64_t height, int64_t width,
                         int64_t oh, int64_t ow) {
  if (b < 0 || b >= n)
    throw InputError("RoiAlign batch index " + std::to_string(b) + " is out of range for a batch of " + std::to_string(n));
  RoiGeometry g;
  g.batch = b;
  const double offset = a.half_pixel ? 0.5 : 0.0;
  const double x1 = static_cast<double>(load(boxes[r * 4])) * a.scale - offset;
  const double y1 = static_cast<double>(load(boxes[r * 4 + 1])) * a.scale - offset;
  const double x2 = static_cast<double>(load(boxes[r * 4 + 2])) * a.scale - offset;
  const double y2 = static_cast<double>(load(boxes[r * 4 + 3])) * a.scale - offset;
  double rw = x2 - x1, rh = y2 - y1;
  if (!a.half_pixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  const double bin_h = rh / static_cast<double>(oh), bin_w = rw / static_cast<double>(ow);
  const int64_t grid_h = a.ratio > 0 ? a.ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
  const int64_t grid_w = a.ratio > 0 ? a.ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
  g.samples = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
  g.per_bin = grid_h * grid_w;
  for (int64_t ph = 0; ph < oh; ++ph)
    for (int64_t pw = 0; pw < ow; ++pw)
      for (int64_t iy = 0; iy < grid_h; ++iy)
        for (int64_t ix = 0; ix < grid_w; ++ix) {
          double sy = y1 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
          double sx = x1 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
          g.taps.push_back(tap(sy, sx, height, width));
        }
  return g;
}

// Mode max: the sample and corner whose weighted term the forward's running max ends on.
template <class T>
std::pair<const Sample*, int> max_term(const RoiGeometry& g, int64_t bin, const T* map) {
  double best = 0;
  std::pair<const Sample*, int> at{nullptr, 0};
  for (int64_t s = 0; s < g.per_bin; ++s) {
    const Sample& t = g.taps[static_cast<size_t>(bin * g.per_bin + s)];
    double v[4];
    for (int k = 0; k < 4; ++k) v[k] = t.w[k] * static_cast<double>(load(map[t.pos[k]]));
    int k = 0;  // std::max keeps the first of equals: max(max(v0, v1), max(v2, v3))
    const int left = v[1] > v[0] ? 1 : 0, right = v[3] > v[2] ? 3 : 2;
    k = v[right] > v[left] ? right : left;
    if (!at.first || v[k] > best) {
      best = v[k];
      at = {&t, k};
    }
  }
  return at;
}

class RoiAlign final : public Kernel {
 public:
  RoiAlign(const Node& n, int64_t) : a_(n) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &rois = io.input(1), &batch = io.input(2);
    View& out = io.output(0);
    const int64_t n = x.dims[0], channels = x.dims[1], height = x.dims[2], width = x.dims[3];
    const int64_t count = rois.dims[0], oh = out.dims[2], ow = out.dims[3];
    const std::vector<int64_t> batch_of = read_ints(batch);
    dispatch(TypeList<float, f16, double>{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* data = x.as<T>();
      const T* boxes = rois.as<T>();
      T* y = out.as<T>();
      for (int64_t r = 0; r < count; ++r) {
        const RoiGeometry g = roi_geometry(a_, boxes, r, batch_of[static_cast<size_t>(r)], n, height, width, oh, ow);
        parallel_for(channels, ctx.threads, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            const T* map = data + (g.batch * channels + c) * height * width;
            for (int64_t bin = 0; bin < oh * ow; ++bin) {
              double acc = 0;
              if (a_.max) {
                const auto [t, k] = max_term(g, bin, map);
                acc = t ? t->w[k] * static_cast<double>(load(map[t->pos[k]])) : 0.0;
              } else {
                for (int64_t s = 0; s < g.per_bin; ++s) {
                  const Sample& t = g.taps[static_cast<size_t>(bin * g.per_bin + s)];
                  double v[4];
                  for (int k = 0; k < 4; ++k) v[k] = t.w[k] * static_cast<double>(load(map[t.pos[k]]));
                  acc += v[0] + v[1] + v[2] + v[3];
                }
                acc /= g.samples;
              }
              y[(r * channels + c) * oh * ow + bin] = store<T>(static_cast<C>(acc));
            }
          }
        });
      }
    });
  }

 private:
  RoiAttrs a_;
};

// ai.onnx_amp RoiAlignGrad(dY, rois, batch_indices, shape[, X]): X is read by mode max only.
class RoiAlignGrad final : public Kernel {
 public:
  RoiAlignGrad(const Node& n, int64_t) : a_(n) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> shape = read_ints(io.input(3));
    if (shape.size() != 4 || io.input(0).rank() != 4)
      throw InputError("RoiAlignGrad takes a 4-D dY and X shape, not " + dims_str(io.input(0).dims) + " and " + dims_str(shape));
    if (a_.max && !io.has_in(4)) throw InputError("RoiAlignGrad of mode max needs X");
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = shape;
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View &dy = io.input(0), &rois = io.input(1), &batch = io.input(2);
    View& dx = io.output(0);
    const int64_t n = dx.dims[0], channels = dx.dims[1], height = dx.dims[2], width = dx.dims[3];
    const int64_t count = rois.dims[0], oh = dy.dims[2], ow = dy.dims[3];
    if (dy.dims[0] != count || dy.dims[1] != channels)
      throw InputError("RoiAlignGrad dY " + dims_str(dy.dims) + " does not fit " + std::to_string(count) + " regions of " +
                       std::to_string(channels) + " channels");
    const std::vector<int64_t> batch_of = read_ints(batch);
    std::vector<double> acc(static_cast<size_t>(dx.numel()), 0.0);
    dispatch(TypeList<float, f16, double>{}, dy.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g_in = dy.as<T>();
      const T* boxes = rois.as<T>();
      const T* data = a_.max ? io.input(4).as<T>() : nullptr;
      for (int64_t r = 0; r < count; ++r) {
        const RoiGeometry g = roi_geometry(a_, boxes, r, batch_of[static_cast<size_t>(r)], n, height, width, oh, ow);
        for (int64_t c = 0; c < channels; ++c) {
          double* map = acc.data() + (g.batch * channels + c) * height * width;
          for (int64_t bin = 0; bin < oh * ow; ++bin) {
            const double d = static_cast<double>(load(g_in[(r * channels + c) * oh * ow + bin]));
            if (a_.max) {
              const auto [t, k] = max_term(g, bin, data + (g.batch * channels + c) * height * width);
              if (t) map[t->pos[k]] += d * t->w[k];
              continue;
            }
            const double share = d / g.samples;
            for (int64_t s = 0; s < g.per_bin; ++s) {
              const Sample& t = g.taps[static_cast<size_t>(bin * g.per_bin + s)];
              for (int k = 0; k < 4; ++k) map[t.pos[k]] += share * t.w[k];
            }
          }
        }
      }
      T* out = dx.as<T>();
      for (size_t k = 0; k < acc.size(); ++k) out[k] = convert<T>(acc[k]);
    });
  }

 private:
  RoiAttrs a_;
};

}  // namespace

const std::vector<OpEntry>& roi_align_ops() {
  static const std::vector<OpEntry> ops = {{"RoiAlign", make_kernel<RoiAlign>, TypeList<float, f16, double>::mask(), {}}};
  return ops;
}

const std::vector<OpEntry>& grad_roi_align_ops() {
  static const std::vector<OpEntry> ops = {
      {"RoiAlignGrad", make_kernel<RoiAlignGrad>, TypeList<float, f16, double>::mask(), {3}}};
  return ops;
}

}  // namespace amp::cpu
