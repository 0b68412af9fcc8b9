// GridSample and its gradient, ai.onnx_amp GridSampleGrad, as device ops (grid_sample.cuh).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/grid_sample.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// The node's mode, padding_mode and align_corners.
GridSampleShape grid_sample_attrs(const Node& n) {
  GridSampleShape shape;
  const std::string mode = n.attr_string("mode", "bilinear"), padding = n.attr_string("padding_mode", "zeros");
  if (mode == "bilinear") shape.mode = 0;
  else if (mode == "nearest") shape.mode = 1;
  else if (mode == "bicubic") shape.mode = 2;
  else throw InputError("GridSample mode '" + mode + "' is not bilinear, nearest or bicubic");
  if (padding == "zeros") shape.padding = 0;
  else if (padding == "border") shape.padding = 1;
  else if (padding == "reflection") shape.padding = 2;
  else throw InputError("GridSample padding_mode '" + padding + "' is not zeros, border or reflection");
  shape.align_corners = n.attr_int("align_corners", 0) != 0;
  return shape;
}

// The extents of X [N, C, H, W] and the grid [N, H_out, W_out, 2].
GridSampleShape with_extents(GridSampleShape shape, const TensorDesc& x, const TensorDesc& grid, const char* op) {
  if (x.dims.size() != 4 || grid.dims.size() != 4 || grid.dims[3] != 2 || grid.dims[0] != x.dims[0])
    throw InputError(std::string(op) + " takes X [N, C, H, W] and grid [N, H_out, W_out, 2]");
  shape.batch = x.dims[0];
  shape.channels = x.dims[1];
  shape.height = x.dims[2];
  shape.width = x.dims[3];
  shape.out_h = grid.dims[1];
  shape.out_w = grid.dims[2];
  return shape;
}

class GridSample final : public CudaOp {
 public:
  GridSample(const Node& n, int64_t) : shape_(grid_sample_attrs(n)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &grid = *s.in.at(1), &y = *s.out.at(0);
    const GridSampleShape shape = with_extents(shape_, x, grid, "GridSample");
    if (y.dims != std::vector<int64_t>{shape.batch, shape.channels, shape.out_h, shape.out_w})
      throw InputError("GridSample's output must be [N, C, H_out, W_out]");
    const DType xt = x.dtype, gt = grid.dtype;
    return std::make_unique<PreparedFunction>([shape, xt, gt](const OpBuffers& b, DeviceContext& ctx) {
      grid_sample(xt, gt, shape, b.in[0], b.in[1], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  GridSampleShape shape_;
};

// ai.onnx_amp GridSampleGrad(dY, X, grid) -> (dX, dGrid), either output absent when not wanted.
class GridSampleGrad final : public CudaOp {
 public:
  GridSampleGrad(const Node& n, int64_t) : shape_(grid_sample_attrs(n)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &dy = *s.in.at(0), &x = *s.in.at(1), &grid = *s.in.at(2);
    const GridSampleShape shape = with_extents(shape_, x, grid, "GridSampleGrad");
    if (dy.dtype != x.dtype || dy.dims != std::vector<int64_t>{shape.batch, shape.channels, shape.out_h, shape.out_w})
      throw InputError("GridSampleGrad's dY must be [N, C, H_out, W_out] of X's type");
    const bool want_dx = s.has_out(0), want_dgrid = s.has_out(1);
    const DType xt = x.dtype, gt = grid.dtype;
    return std::make_unique<PreparedFunction>(
        [shape, xt, gt, want_dx, want_dgrid](const OpBuffers& b, DeviceContext& ctx) {
          grid_sample_grad(xt, gt, shape, b.in[0], b.in[1], b.in[2], want_dx ? b.out[0] : nullptr,
                           want_dgrid ? b.out[1] : nullptr, b.workspace, ctx.sm_count(), ctx.stream());
        },
        want_dx ? grid_sample_grad_workspace(shape) : 0);
  }

 private:
  GridSampleShape shape_;
};

}  // namespace

const std::vector<CudaOpEntry>& grid_sample_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "GridSample", make_op<GridSample>},
                                               {kAmpDomain, "GridSampleGrad", make_op<GridSampleGrad>}};
  return ops;
}

}  // namespace amp::cuda
