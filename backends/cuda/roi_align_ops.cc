// RoiAlign as a device op (roi_align.cuh).
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/roi_align.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class RoiAlign final : public CudaOp {
 public:
  RoiAlign(const Node& n, int64_t) {
    const std::string mode = n.attr_string("mode", "avg"), ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
    if (mode != "avg" && mode != "max") throw InputError("RoiAlign mode '" + mode + "' is not avg or max");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      throw InputError("RoiAlign coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
    shape_.max = mode == "max";
    shape_.half_pixel = ctm == "half_pixel";
    shape_.sampling_ratio = n.attr_int("sampling_ratio", 0);
    shape_.spatial_scale = n.attr_float("spatial_scale", 1.0f);
    if (shape_.sampling_ratio < 0) throw InputError("RoiAlign sampling_ratio must not be negative");
  }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &rois = *s.in.at(1), &batch = *s.in.at(2), &y = *s.out.at(0);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16)
      throw InputError("RoiAlign on cuda takes float or float16, not " + std::string(dtype_name(x.dtype)));
    if (x.dims.size() != 4) throw InputError("RoiAlign's X must be [N, C, H, W]");
    if (rois.dtype != x.dtype || rois.dims.size() != 2 || rois.dims[1] != 4)
      throw InputError("RoiAlign's rois must be [num_rois, 4] of X's type");
    if (batch.dtype != DType::kInt64 || batch.dims != std::vector<int64_t>{rois.dims[0]})
      throw InputError("RoiAlign's batch_indices must be [num_rois] int64");
    if (y.dims.size() != 4) throw InputError("RoiAlign's output must be [num_rois, C, output_height, output_width]");
    RoiAlignShape shape = shape_;
    shape.batch = x.dims[0];
    shape.channels = x.dims[1];
    shape.height = x.dims[2];
    shape.width = x.dims[3];
    shape.rois = rois.dims[0];
    shape.out_h = y.dims[2];
    shape.out_w = y.dims[3];
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([shape, t](const OpBuffers& b, DeviceContext& ctx) {
      roi_align(t, shape, b.in[0], b.in[1], static_cast<const int64_t*>(b.in[2]), b.out[0], ctx.sm_count(),
                ctx.stream());
    });
  }

 private:
  RoiAlignShape shape_;
};

}  // namespace

const std::vector<CudaOpEntry>& roi_align_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "RoiAlign", make_op<RoiAlign>}};
  return ops;
}

}  // namespace amp::cuda
