// Pad on the device as strided copies (strided_copy.cuh), in launches that follow one another on
// the stream: the whole output filled with the constant (a 0-stride copy of constant_value, or a
// memset for 0), the input copied into its window (cropped where amounts are negative), then, for
// reflect, edge and wrap, each axis's borders copied from the output itself (a -1 stride mirrors,
// a 0 stride repeats the edge, a +1 stride wraps), axis after axis so corners read borders already
// written. The amounts are read on the host while planning (graph/ops/pad.h's geometry).
// ai.onnx_amp PadGrad sums, for each input element, the dY elements pad_source says read it
// (axis_sum_plan.h: a gather through per-axis lists, in fp32, no atomics).
#include <algorithm>

#include "backends/cuda/axis_sum_plan.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/strided_copy.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/pad.h"

namespace amp::cuda {
namespace {

std::vector<int64_t> host_values(const OpShapes& s, size_t i, const char* what) {
  const Tensor* t = i < s.host.size() ? s.host[i] : nullptr;
  if (!t) throw InputError(std::string(what) + " must be known before the run (a constant or computed from shapes)");
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t->numel(); ++k) v.push_back(static_cast<int64_t>(t->element(k)));
  return v;
}

class Pad final : public CudaOp {
 public:
  Pad(const Node& n, int64_t opset) : attrs_(opset < 11), mode_(pad_mode(n)), pads_attr_(n.attr_ints("pads")) {
    if (attrs_ && n.attr_float("value", 0.0f) != 0.0f)
      throw InputError("Pad before opset 11 with a non-zero value attribute is not supported on the GPU");
  }

  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& in = *s.in[0];
    const TensorDesc& out = *s.out[0];
    std::vector<int64_t> pads = pads_attr_, axes;
    if (!attrs_) {
      pads = host_values(s, 1, "Pad pads");
      if (s.has_in(3)) axes = host_values(s, 3, "Pad axes");
    }
    const PadAmounts p = pad_amounts(pads, axes, in.dims.size());
    const size_t rank = in.dims.size(), elem = dtype_size(in.dtype);
    const std::vector<int64_t> in_strides = contiguous_strides(in.dims), out_strides = contiguous_strides(out.dims);
    // The window of the input inside the output, per axis: output start, input start, extent.
    std::vector<int64_t> out_start(rank), in_start(rank), kept(rank);
    for (size_t a = 0; a < rank; ++a) {
      out_start[a] = std::max<int64_t>(p.begin[a], 0);
      in_start[a] = std::max<int64_t>(-p.begin[a], 0);
      kept[a] = std::max<int64_t>(0, in.dims[a] + std::min<int64_t>(p.begin[a], 0) + std::min<int64_t>(p.end[a], 0));
      if (mode_ != PadMode::kConstant && (p.begin[a] < 0 || p.end[a] < 0))
        throw InputError(std::string("Pad mode ") + pad_mode_name(mode_) + " with negative amounts is not supported on the GPU");
      if (mode_ == PadMode::kReflect && (p.begin[a] >= in.dims[a] || p.end[a] >= in.dims[a]) && in.dims[a] > 1)
        throw InputError("Pad mode reflect by " + std::to_string(std::max(p.begin[a], p.end[a])) + " of an axis of extent " +
                         std::to_string(in.dims[a]) + " is not supported on the GPU (amounts below the extent are)");
      if (mode_ == PadMode::kWrap && (p.begin[a] > in.dims[a] || p.end[a] > in.dims[a]))
        throw InputError("Pad mode wrap by more than an axis's extent is not supported on the GPU");
    }
    StridedCopy window;
    window.dims = kept;
    window.src_strides = in_strides;
    window.dst_strides = out_strides;
    window.elem_bytes = elem;
    for (size_t a = 0; a < rank; ++a) {
      window.src_base += in_start[a] * in_strides[a];
      window.dst_base += out_start[a] * out_strides[a];
    }
    int64_t window_numel = 1;
    for (int64_t k : kept) window_numel *= k;
    const bool copy_window = window_numel > 0;
    if (copy_window) window = simplify(window);

    // Borders, one launch per axis (reflect, edge, wrap): [axes before: whole padded extent,
    // this axis: the border, axes after: the input's extent at its place].
    std::vector<std::vector<StridedCopy>> borders;
    if (mode_ != PadMode::kConstant) {
      for (size_t a = 0; a < rank; ++a) {
        const int64_t b = p.begin[a], e = p.end[a], d = in.dims[a];
        std::vector<StridedCopy> axis_copies;
        for (int side = 0; side < 2; ++side) {
          const int64_t count = side == 0 ? b : e;
          if (count == 0 || d == 0) continue;
          StridedCopy c;
          c.elem_bytes = elem;
          c.dst_strides = out_strides;
          c.src_strides = out_strides;
          for (size_t k = 0; k < rank; ++k) {
            int64_t extent = k < a ? out.dims[k] : in.dims[k], start = k < a ? 0 : p.begin[k];
            if (k == a) extent = count;
            c.dims.push_back(extent);
            if (k != a) {
              c.dst_base += start * out_strides[k];
              c.src_base += start * out_strides[k];
            }
          }
          // Along axis a: the first written index, the index it reads and the step between reads.
          int64_t first = side == 0 ? 0 : b + d, from = 0, step = 1;
          switch (mode_) {
            case PadMode::kReflect:
              from = d == 1 ? b : (side == 0 ? 2 * b : b + d - 2);
              step = d == 1 ? 0 : -1;
              break;
            case PadMode::kEdge:
              from = side == 0 ? b : b + d - 1;
              step = 0;
              break;
            case PadMode::kWrap:
              from = side == 0 ? d : b;
              step = 1;
              break;
            case PadMode::kConstant: break;
          }
          c.dst_base += first * out_strides[a];
          c.src_base += from * out_strides[a];
          c.src_strides[a] = step * out_strides[a];
          axis_copies.push_back(simplify(c));
        }
        if (!axis_copies.empty()) borders.push_back(std::move(axis_copies));
      }
    }
    const bool has_value = !attrs_ && s.has_in(2) && s.in[2]->numel() > 0;
    if (has_value && s.in[2]->dtype != in.dtype)
      throw InputError("Pad constant_value is " + std::string(dtype_name(s.in[2]->dtype)) + " but the data is " +
                       std::string(dtype_name(in.dtype)));
    StridedCopy fill;
    fill.dims = out.dims;
    fill.src_strides.assign(rank, 0);
    fill.dst_strides = out_strides;
    fill.elem_bytes = elem;
    const size_t bytes = static_cast<size_t>(out.numel()) * elem;
    const bool needs_fill = mode_ == PadMode::kConstant && window_numel < out.numel();
    if (needs_fill && has_value && rank > 0) fill = simplify(fill);
    return std::make_unique<PreparedFunction>([=](const OpBuffers& buf, DeviceContext& ctx) {
      if (bytes == 0) return;
      if (needs_fill) {
        if (has_value) strided_copy(fill, buf.in[2], buf.out[0], ctx.sm_count(), ctx.stream());
        else AMP_CUDA_CHECK(cudaMemsetAsync(buf.out[0], 0, bytes, ctx.stream()));
      }
      if (copy_window) strided_copy(window, buf.in[0], buf.out[0], ctx.sm_count(), ctx.stream());
      for (const std::vector<StridedCopy>& axis : borders)
        strided_copies(axis, std::vector<const void*>(axis.size(), buf.out[0]), std::vector<void*>(axis.size(), buf.out[0]),
                       ctx.sm_count(), ctx.stream());
    });
  }

 private:
  bool attrs_;
  PadMode mode_;
  std::vector<int64_t> pads_attr_;
};

// ai.onnx_amp PadGrad(dY, pads, shape[, axes]) in any mode, negative amounts included: dX (of
// `shape`) sums every dY element into the element it was read from, as the CPU kernel does.
class PadGrad final : public CudaOp {
 public:
  PadGrad(const Node& n, int64_t) : mode_(pad_mode(n)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext& ctx) const override {
    const TensorDesc& dy = *s.in[0];
    const TensorDesc& dx = *s.out[0];
    const PadAmounts p = pad_amounts(host_values(s, 1, "PadGrad pads"),
                                     s.has_in(3) ? host_values(s, 3, "PadGrad axes") : std::vector<int64_t>{}, dx.dims.size());
    std::vector<AxisReads> reads(dx.dims.size());
    for (size_t a = 0; a < dx.dims.size(); ++a) {
      reads[a].resize(static_cast<size_t>(dx.dims[a]));
      for (int64_t o = 0; o < dy.dims[a]; ++o) {
        const int64_t i = pad_source(o, dx.dims[a], p.begin[a], mode_);
        if (i >= 0) reads[a][static_cast<size_t>(i)].emplace_back(o, 1.0);
      }
    }
    return prepare_axis_sums(reads, dy, dx, false, ctx);
  }

 private:
  PadMode mode_;
};

}  // namespace

const std::vector<CudaOpEntry>& pad_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Pad", make_op<Pad>}, {kAmpDomain, "PadGrad", make_op<PadGrad>}};
  return ops;
}

}  // namespace amp::cuda
