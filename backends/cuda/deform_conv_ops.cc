// ai.onnx_amp DeformConv as a device op (deform_conv.cuh). Its gradient, DeformConvGrad, has no
// device kernel: a training graph through it is refused by name.
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/deform_conv.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/window.h"

namespace amp::cuda {
namespace {

class DeformConv final : public CudaOp {
 public:
  DeformConv(const Node& n, int64_t)
      : window_(n), groups_(n.attr_int("group", 1)), offset_groups_(n.attr_int("offset_group", 1)) {
    if (groups_ <= 0 || offset_groups_ <= 0) throw InputError("DeformConv's group and offset_group must be positive");
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc &x = *s.in.at(0), &w = *s.in.at(1), &offset = *s.in.at(2), &y = *s.out.at(0);
    if (x.dtype != DType::kFloat && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16)
      throw InputError("DeformConv on cuda takes float, float16 or bfloat16, not " + std::string(dtype_name(x.dtype)));
    if (x.dims.size() != 4 || w.dims.size() != 4) throw InputError("DeformConv runs on 2-D images: X and W must be 4-D");
    DeformConvShape d;
    d.batch = x.dims[0], d.channels = x.dims[1], d.height = x.dims[2], d.width = x.dims[3];
    d.outputs = w.dims[0], d.kernel_h = w.dims[2], d.kernel_w = w.dims[3];
    d.groups = groups_, d.offset_groups = offset_groups_;
    if (d.channels % d.groups != 0 || d.outputs % d.groups != 0 || w.dims[1] * d.groups != d.channels ||
        d.channels % d.offset_groups != 0)
      throw InputError("DeformConv channels do not match their groups");
    const Window win = make_window(window_, {d.height, d.width}, {d.kernel_h, d.kernel_w});
    d.out_h = win.out[0], d.out_w = win.out[1];
    d.stride_h = win.strides[0], d.stride_w = win.strides[1];
    d.pad_h = win.pads_begin[0], d.pad_w = win.pads_begin[1];
    d.dilation_h = win.dilations[0], d.dilation_w = win.dilations[1];
    const int64_t taps = d.kernel_h * d.kernel_w;
    if (offset.dims != std::vector<int64_t>{d.batch, d.offset_groups * 2 * taps, d.out_h, d.out_w} ||
        y.dims != std::vector<int64_t>{d.batch, d.outputs, d.out_h, d.out_w} ||
        (s.has_in(4) && s.in[4]->dims != std::vector<int64_t>{d.batch, d.offset_groups * taps, d.out_h, d.out_w}))
      throw InputError("DeformConv's offset, mask or output do not fit X and W");
    const bool bias = s.has_in(3), mask = s.has_in(4);
    const DType t = x.dtype;
    return std::make_unique<PreparedFunction>([d, t, bias, mask](const OpBuffers& b, DeviceContext& ctx) {
      deform_conv(t, d, b.in[0], b.in[1], b.in[2], bias ? b.in[3] : nullptr, mask ? b.in[4] : nullptr, b.out[0],
                  ctx.sm_count(), ctx.stream());
    });
  }

 private:
  WindowAttrs window_;
  int64_t groups_, offset_groups_;
};

}  // namespace

const std::vector<CudaOpEntry>& deform_conv_ops() {
  static const std::vector<CudaOpEntry> ops = {{kAmpDomain, "DeformConv", make_op<DeformConv>}};
  return ops;
}

}  // namespace amp::cuda
