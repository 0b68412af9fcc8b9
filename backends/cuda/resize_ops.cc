// Resize on the device (resize.cuh): the scales are read on the host while planning, as the CPU
// kernel reads them; the per-axis geometry is graph/ops/resize.h's. ai.onnx_amp ResizeGrad sums,
// for each input element, the dY elements that read it times their weights (axis_sum_plan.h: a
// gather through per-axis lists in fp32, no atomics, so no run-to-run variation). Cubic mode, whose
// outputs read 4 inputs an axis, runs forward through the same per-axis lists (each output index
// reading its 4 taps, those clamped onto one input merged), and backward as the other modes.
#include "backends/cuda/axis_sum_plan.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/resize.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/resize.h"

namespace amp::cuda {
namespace {

// Cubic taps as per-axis read lists: reads[a][to] gets (from, weight) for every tap of output
// index o along axis a (to = o, from = the tap's input for the forward; the other way round for
// the gradient), taps of one output clamped onto the same input merged, zero weights dropped.
std::vector<AxisReads> cubic_reads(const ResizeAttrs& attrs, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                   const std::vector<float>& scales, bool forward) {
  const std::vector<double> inverse = resize_inverse_scales(in, out, scales);
  std::vector<AxisReads> reads(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    const double resized = scales.size() == in.size() ? static_cast<double>(in[a]) * static_cast<double>(scales[a])
                                                      : static_cast<double>(out[a]);
    const std::vector<CubicTap> taps = resize_cubic_taps(attrs, in[a], out[a], inverse[a], resized);
    reads[a].resize(static_cast<size_t>(forward ? out[a] : in[a]));
    for (size_t o = 0; o < taps.size(); ++o)
      for (int k = 0; k < 4; ++k) {
        const CubicTap& t = taps[o];
        if (t.w[k] == 0) continue;
        const int64_t from = forward ? t.i[k] : static_cast<int64_t>(o);
        std::vector<std::pair<int64_t, double>>& list = reads[a][forward ? o : static_cast<size_t>(t.i[k])];
        if (!list.empty() && list.back().first == from) list.back().second += t.w[k];
        else list.emplace_back(from, t.w[k]);
      }
  }
  return reads;
}

class Resize final : public CudaOp {
 public:
  Resize(const Node& n, int64_t opset) : attrs_(resize_attrs(n, opset)), opset_(opset) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& x = *s.in[0];
    const TensorDesc& y = *s.out[0];
    const size_t scales_at = opset_ < 11 ? 1 : 2;
    std::vector<float> scales;
    if (s.has_in(scales_at)) {
      const Tensor* t = scales_at < s.host.size() ? s.host[scales_at] : nullptr;
      if (!t) throw InputError("Resize scales must be known before the run (a constant or computed from shapes)");
      for (int64_t k = 0; k < t->numel(); ++k) scales.push_back(static_cast<float>(t->element(k)));
    }
    if (attrs_.mode == ResizeAttrs::Mode::kCubic)
      return prepare_axis_sums(cubic_reads(attrs_, x.dims, y.dims, scales, true), x, y, true, ctx);
    if (x.dims.size() > static_cast<size_t>(kMaxResizeRank))
      throw InputError("Resize of rank " + std::to_string(x.dims.size()) + " is not supported on the GPU (at most " +
                       std::to_string(kMaxResizeRank) + ")");
    const std::vector<double> inverse = resize_inverse_scales(x.dims, y.dims, scales);
    ResizeShape r;
    r.rank = static_cast<int>(x.dims.size());
    r.mode = static_cast<int>(attrs_.mode);
    r.coord = static_cast<int>(attrs_.coord);
    r.nearest = static_cast<int>(attrs_.nearest);
    r.type = x.dtype;
    int interpolating = 0;
    for (size_t a = 0; a < x.dims.size(); ++a) {
      r.in[a] = x.dims[a];
      r.out[a] = y.dims[a];
      r.inverse[a] = inverse[a];
      r.resized[a] = scales.size() == x.dims.size() ? static_cast<double>(x.dims[a]) * static_cast<double>(scales[a])
                                                    : static_cast<double>(y.dims[a]);
      bool any = false;
      for (const ResizeTap& t : resize_taps(attrs_, x.dims[a], y.dims[a], r.inverse[a], r.resized[a])) any = any || t.w != 0;
      interpolating += any;
    }
    if (interpolating > 3)
      throw InputError("Resize interpolating along " + std::to_string(interpolating) +
                       " axes is not supported on the GPU (at most 3)");
    return std::make_unique<PreparedFunction>([r](const OpBuffers& b, DeviceContext& ctx) {
      resize(r, b.in[0], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  ResizeAttrs attrs_;
  int64_t opset_;
};

// ai.onnx_amp ResizeGrad(dY, shape, scales): the gradient of Resize's X, of `shape`. Each output
// index along an axis reads its tap's i0 with weight 1 - w and i1 with weight w (i0 alone, weight
// 1, where w is 0; cubic: its four taps), the weights the CPU kernel spreads dY with.
class ResizeGrad final : public CudaOp {
 public:
  ResizeGrad(const Node& n, int64_t) : attrs_(resize_attrs(n, 17)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& dy = *s.in[0];
    const TensorDesc& dx = *s.out[0];
    std::vector<float> scales;
    if (s.has_in(2)) {
      const Tensor* t = s.host.size() > 2 ? s.host[2] : nullptr;
      if (!t) throw InputError("ResizeGrad scales must be known before the run (a constant or computed from shapes)");
      for (int64_t k = 0; k < t->numel(); ++k) scales.push_back(static_cast<float>(t->element(k)));
    }
    if (attrs_.mode == ResizeAttrs::Mode::kCubic)
      return prepare_axis_sums(cubic_reads(attrs_, dx.dims, dy.dims, scales, false), dy, dx, true, ctx);
    const std::vector<double> inverse = resize_inverse_scales(dx.dims, dy.dims, scales);
    std::vector<AxisReads> reads(dx.dims.size());
    for (size_t a = 0; a < dx.dims.size(); ++a) {
      const double resized = scales.size() == dx.dims.size()
                                 ? static_cast<double>(dx.dims[a]) * static_cast<double>(scales[a])
                                 : static_cast<double>(dy.dims[a]);
      const std::vector<ResizeTap> taps = resize_taps(attrs_, dx.dims[a], dy.dims[a], inverse[a], resized);
      reads[a].resize(static_cast<size_t>(dx.dims[a]));
      for (size_t o = 0; o < taps.size(); ++o) {
        const ResizeTap& t = taps[o];
        const int64_t at = static_cast<int64_t>(o);
        if (t.w == 0) {
          reads[a][static_cast<size_t>(t.i0)].emplace_back(at, 1.0);
          continue;
        }
        reads[a][static_cast<size_t>(t.i0)].emplace_back(at, 1.0 - t.w);
        reads[a][static_cast<size_t>(t.i1)].emplace_back(at, t.w);
      }
    }
    return prepare_axis_sums(reads, dy, dx, true, ctx);
  }

 private:
  ResizeAttrs attrs_;
};

}  // namespace

const std::vector<CudaOpEntry>& resize_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Resize", make_op<Resize>},
                                               {kAmpDomain, "ResizeGrad", make_op<ResizeGrad>}};
  return ops;
}

}  // namespace amp::cuda
