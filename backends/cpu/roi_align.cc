// RoiAlign (opset 16): for each region of interest [x1, y1, x2, y2] (times spatial_scale, shifted
// by half a pixel with coordinate_transformation_mode half_pixel, the default) on its batch
// entry's feature map, an output_height x output_width grid of bins, each the average (mode avg) or
// the largest (mode max) of sampling_ratio² bilinear samples (0: ceil(bin size) per side), as
// ONNX Runtime computes it: out-of-map samples count as zero, and mode max takes the largest of the
// four weighted corner terms of each sample. 16-bit types are computed in fp32 and rounded once.
#include <cmath>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

class RoiAlign final : public Kernel {
 public:
  RoiAlign(const Node& n, int64_t)
      : max_(n.attr_string("mode", "avg") == "max"),
        half_pixel_(n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel"),
        ratio_(n.attr_int("sampling_ratio", 0)),
        scale_(n.attr_float("spatial_scale", 1.0f)) {
    const std::string mode = n.attr_string("mode", "avg"), ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
    if (mode != "avg" && mode != "max") throw InputError("RoiAlign mode '" + mode + "' is not avg or max");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      throw InputError("RoiAlign coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
    if (ratio_ < 0) throw InputError("RoiAlign sampling_ratio must not be negative");
  }

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
        const int64_t b = batch_of[static_cast<size_t>(r)];
        if (b < 0 || b >= n)
          throw InputError("RoiAlign batch index " + std::to_string(b) + " is out of range for a batch of " + std::to_string(n));
        const double offset = half_pixel_ ? 0.5 : 0.0;
        const double x1 = static_cast<double>(load(boxes[r * 4])) * scale_ - offset;
        const double y1 = static_cast<double>(load(boxes[r * 4 + 1])) * scale_ - offset;
        const double x2 = static_cast<double>(load(boxes[r * 4 + 2])) * scale_ - offset;
        const double y2 = static_cast<double>(load(boxes[r * 4 + 3])) * scale_ - offset;
        double rw = x2 - x1, rh = y2 - y1;
        if (!half_pixel_) {
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        const double bin_h = rh / static_cast<double>(oh), bin_w = rw / static_cast<double>(ow);
        const int64_t grid_h = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
        const int64_t grid_w = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
        const double samples = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
        // The bilinear taps of every sample of every bin (the same for each channel).
        std::vector<Sample> taps;
        for (int64_t ph = 0; ph < oh; ++ph)
          for (int64_t pw = 0; pw < ow; ++pw)
            for (int64_t iy = 0; iy < grid_h; ++iy)
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                double sy = y1 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
                double sx = x1 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
                taps.push_back(tap(sy, sx, height, width));
              }
        const int64_t per_bin = grid_h * grid_w;
        parallel_for(channels, ctx.threads, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            const T* map = data + (b * channels + c) * height * width;
            for (int64_t bin = 0; bin < oh * ow; ++bin) {
              double acc = 0, best = 0;
              bool first = true;
              for (int64_t s = 0; s < per_bin; ++s) {
                const Sample& t = taps[static_cast<size_t>(bin * per_bin + s)];
                double v[4];
                for (int k = 0; k < 4; ++k) v[k] = t.w[k] * static_cast<double>(load(map[t.pos[k]]));
                if (max_) {
                  const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                  best = first ? m : std::max(best, m);
                  first = false;
                } else {
                  acc += v[0] + v[1] + v[2] + v[3];
                }
              }
              y[(r * channels + c) * oh * ow + bin] = store<T>(static_cast<C>(max_ ? best : acc / samples));
            }
          }
        });
      }
    });
  }

 private:
  static Sample tap(double y, double x, int64_t height, int64_t width) {
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

  bool max_, half_pixel_;
  int64_t ratio_;
  float scale_;
};

}  // namespace

const std::vector<OpEntry>& roi_align_ops() {
  static const std::vector<OpEntry> ops = {{"RoiAlign", make_kernel<RoiAlign>, TypeList<float, f16, double>::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
