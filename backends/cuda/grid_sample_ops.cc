// GridSample as a device op (grid_sample.cuh). Its gradient, ai.onnx_amp GridSampleGrad, has no
// device kernel (the CUDA backend refuses it by name).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/grid_sample.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class GridSample final : public CudaOp {
 public:
  GridSample(const Node& n, int64_t) {
    const std::string mode = n.attr_string("mode", "bilinear"), padding = n.attr_string("padding_mode", "zeros");
    if (mode == "bilinear") shape_.mode = 0;
    else if (mode == "nearest") shape_.mode = 1;
    else if (mode == "bicubic") shape_.mode = 2;
    else throw InputError("GridSample mode '" + mode + "' is not bilinear, nearest or bicubic");
    if (padding == "zeros") shape_.padding = 0;
    else if (padding == "border") shape_.padding = 1;
    else if (padding == "reflection") shape_.padding = 2;
    else throw InputError("GridSample padding_mode '" + padding + "' is not zeros, border or reflection");
    shape_.align_corners = n.attr_int("align_corners", 0) != 0;
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &grid = *s.in.at(1), &y = *s.out.at(0);
    if (x.dims.size() != 4 || grid.dims.size() != 4 || grid.dims[3] != 2 || grid.dims[0] != x.dims[0])
      throw InputError("GridSample takes X [N, C, H, W] and grid [N, H_out, W_out, 2]");
    GridSampleShape shape = shape_;
    shape.batch = x.dims[0];
    shape.channels = x.dims[1];
    shape.height = x.dims[2];
    shape.width = x.dims[3];
    shape.out_h = grid.dims[1];
    shape.out_w = grid.dims[2];
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

}  // namespace

const std::vector<CudaOpEntry>& grid_sample_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "GridSample", make_op<GridSample>}};
  return ops;
}

}  // namespace amp::cuda
