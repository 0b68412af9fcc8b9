// Ops that move elements without arithmetic: reshapes (the same bytes: the plan aliases output
// and input, see CudaOp::aliases_input, and falls back to a copy where it cannot), Transpose, Slice, Split, Concat, Expand,
// Tile, DepthToSpace, SpaceToDepth (strided copies, strided_copy.cuh, which the plan composes and
// batches: CudaOp::element_copies), Gather and the gradients of Slice and Gather. Shape operands (Reshape's shape, Slice's starts)
// are read on the host while planning; only data moves on the device.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/copy_fusion.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/gather.cuh"
#include "backends/cuda/strided_copy.cuh"
#include "graph/amp_ops.h"
#include "graph/error.h"
#include "graph/ops/elementwise_program_eval.h"

namespace amp::cuda {
namespace {

std::vector<int64_t> host_ints(const OpShapes& s, size_t i, const char* what) {
  const Tensor* t = i < s.host.size() ? s.host[i] : nullptr;
  if (!t) throw InputError(std::string(what) + " must be known before the run (a constant or computed from shapes)");
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t->numel(); ++k) v.push_back(static_cast<int64_t>(t->element(k)));
  return v;
}

int64_t normalize_axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) throw InputError("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the same bytes under other dims. The plan
// aliases them; the copy runs only where it cannot (the input is state the step updates).
class SameBytes final : public CudaOp {
 public:
  SameBytes(const Node&, int64_t) {}
  bool aliases_input(const OpShapes&) const override { return true; }
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const size_t bytes = s.out[0]->nbytes();
    return std::make_unique<PreparedFunction>([bytes](const OpBuffers& b, DeviceContext& ctx) {
      if (bytes > 0) AMP_CUDA_CHECK(cudaMemcpyAsync(b.out[0], b.in[0], bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
    });
  }
};

// An op that is element copies only (CudaOp::element_copies): they run as one launch.
class CopyingOp : public CudaOp {
 public:
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const final {
    return prepare_copies(element_copies(s));
  }
};

OperandCopy one_copy(StridedCopy c) { return OperandCopy{simplify(std::move(c)), 0, 0}; }

class Transpose final : public CopyingOp {
 public:
  Transpose(const Node& n, int64_t) : perm_(n.attr_ints("perm")) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const TensorDesc& in = *s.in[0];
    std::vector<int64_t> perm = perm_;
    if (perm.empty())
      for (size_t d = in.dims.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    const std::vector<int64_t> in_strides = contiguous_strides(in.dims);
    StridedCopy c;
    c.dims = s.out[0]->dims;
    c.dst_strides = contiguous_strides(c.dims);
    for (int64_t p : perm) c.src_strides.push_back(in_strides.at(static_cast<size_t>(normalize_axis(p, in.dims.size()))));
    c.elem_bytes = dtype_size(in.dtype);
    return {one_copy(c)};
  }

 private:
  std::vector<int64_t> perm_;
};

// The first element and step per axis of a Slice window (ONNX's clamping of starts).
void slice_window(const OpShapes& s, const std::vector<int64_t>& dims, size_t first_param, std::vector<int64_t>* start,
                  std::vector<int64_t>* step) {
  const std::vector<int64_t> starts = host_ints(s, first_param, "Slice starts");
  std::vector<int64_t> axes = s.has_in(first_param + 2) ? host_ints(s, first_param + 2, "Slice axes") : std::vector<int64_t>{};
  std::vector<int64_t> steps = s.has_in(first_param + 3) ? host_ints(s, first_param + 3, "Slice steps") : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  start->assign(dims.size(), 0);
  step->assign(dims.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = static_cast<size_t>(normalize_axis(axes.at(i), dims.size()));
    const int64_t dim = dims[a], st = steps.at(i);
    if (st == 0) throw InputError("Slice step 0");
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    b = st > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
    (*start)[a] = b;
    (*step)[a] = st;
  }
}

class Slice final : public CopyingOp {
 public:
  Slice(const Node&, int64_t) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const TensorDesc& in = *s.in[0];
    std::vector<int64_t> start, step;
    slice_window(s, in.dims, 1, &start, &step);
    const std::vector<int64_t> in_strides = contiguous_strides(in.dims);
    StridedCopy c;
    c.dims = s.out[0]->dims;
    c.dst_strides = contiguous_strides(c.dims);
    for (size_t d = 0; d < in.dims.size(); ++d) {
      c.src_strides.push_back(in_strides[d] * step[d]);
      c.src_base += start[d] * in_strides[d];
    }
    c.elem_bytes = dtype_size(in.dtype);
    return {one_copy(c)};
  }
};

// ai.onnx_amp SliceGrad(dY, shape, starts, ends, axes, steps): zeros with dY in Slice's window.
class SliceGrad final : public CudaOp {
 public:
  SliceGrad(const Node&, int64_t) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const TensorDesc& out = *s.out[0];
    std::vector<int64_t> start, step;
    slice_window(s, out.dims, 2, &start, &step);
    const std::vector<int64_t> out_strides = contiguous_strides(out.dims);
    StridedCopy c;
    c.dims = s.in[0]->dims;
    c.src_strides = contiguous_strides(c.dims);
    for (size_t d = 0; d < out.dims.size(); ++d) {
      c.dst_strides.push_back(out_strides[d] * step[d]);
      c.dst_base += start[d] * out_strides[d];
    }
    c.elem_bytes = dtype_size(out.dtype);
    c = simplify(std::move(c));
    const size_t bytes = out.nbytes();
    return std::make_unique<PreparedFunction>([c, bytes](const OpBuffers& b, DeviceContext& ctx) {
      if (bytes > 0) AMP_CUDA_CHECK(cudaMemsetAsync(b.out[0], 0, bytes, ctx.stream()));
      strided_copy(c, b.in[0], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }
};

class Expand final : public CopyingOp {
 public:
  Expand(const Node&, int64_t) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    StridedCopy c;
    c.dims = s.out[0]->dims;
    c.dst_strides = contiguous_strides(c.dims);
    c.src_strides = broadcast_strides(s.in[0]->dims, c.dims);
    c.elem_bytes = dtype_size(s.in[0]->dtype);
    return {one_copy(c)};
  }
};

// Tile: the output seen as [r0, d0, r1, d1, ...] reads the input with stride 0 along each repeat.
class Tile final : public CopyingOp {
 public:
  Tile(const Node&, int64_t) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const std::vector<int64_t>& in = s.in[0]->dims;
    const std::vector<int64_t>& out = s.out[0]->dims;
    const std::vector<int64_t> in_strides = contiguous_strides(in);
    StridedCopy c;
    for (size_t d = 0; d < in.size(); ++d) {
      c.dims.push_back(in[d] ? out[d] / in[d] : 0);
      c.src_strides.push_back(0);
      c.dims.push_back(in[d]);
      c.src_strides.push_back(in_strides[d]);
    }
    c.dst_strides = contiguous_strides(c.dims);
    c.elem_bytes = dtype_size(s.in[0]->dtype);
    return {one_copy(c)};
  }
};

// DepthToSpace and SpaceToDepth: a transpose of the [N, C, H, W] input seen as six dims
// (backends/cpu/depth_to_space.cc has ONNX's definitions).
class DepthSpace final : public CopyingOp {
 public:
  DepthSpace(const Node& n, int64_t)
      : to_space_(n.op_type() == "DepthToSpace"), crd_(n.attr_string("mode", "DCR") == "CRD"), b_(n.attr_int("blocksize", 0)) {
    if (b_ <= 0) throw InputError(n.op_type() + " needs a positive blocksize");
  }
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const std::vector<int64_t>& x = s.in[0]->dims;
    if (x.size() != 4) throw InputError("DepthToSpace and SpaceToDepth take 4-D inputs");
    const int64_t n = x[0], c = x[1], h = x[2], w = x[3], b = b_;
    std::vector<int64_t> six;
    std::vector<size_t> perm;
    if (to_space_ && crd_) {
      six = {n, c / (b * b), b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else if (to_space_) {
      six = {n, b, b, c / (b * b), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      six = {n, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
    }
    const std::vector<int64_t> in_strides = contiguous_strides(six);
    StridedCopy copy;
    for (size_t p : perm) {
      copy.dims.push_back(six[p]);
      copy.src_strides.push_back(in_strides[p]);
    }
    copy.dst_strides = contiguous_strides(copy.dims);
    copy.elem_bytes = dtype_size(s.in[0]->dtype);
    return {one_copy(copy)};
  }

 private:
  bool to_space_, crd_;
  int64_t b_;
};

// Concat and Split: each part is a block of the whole along the axis.
StridedCopy part_copy(const std::vector<int64_t>& part, const std::vector<int64_t>& whole, size_t axis, int64_t offset,
                      size_t elem_bytes, bool into_whole) {
  StridedCopy c;
  c.dims = part;
  const std::vector<int64_t> ps = contiguous_strides(part), ws = contiguous_strides(whole);
  c.src_strides = into_whole ? ps : ws;
  c.dst_strides = into_whole ? ws : ps;
  (into_whole ? c.dst_base : c.src_base) = offset * ws[axis];
  c.elem_bytes = elem_bytes;
  return simplify(c);
}

class Concat final : public CopyingOp {
 public:
  Concat(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const std::vector<int64_t>& whole = s.out[0]->dims;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, whole.size()));
    std::vector<OperandCopy> parts;
    int64_t offset = 0;
    for (size_t i = 0; i < s.in.size(); ++i) {
      const TensorDesc& in = *s.in[i];
      parts.push_back({part_copy(in.dims, whole, axis, offset, dtype_size(in.dtype), true), i, 0});
      offset += in.dims[axis];
    }
    return parts;
  }

 private:
  int64_t axis_;
};

class Split final : public CopyingOp {
 public:
  Split(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  std::vector<OperandCopy> element_copies(const OpShapes& s) const override {
    const std::vector<int64_t>& whole = s.in[0]->dims;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, whole.size()));
    std::vector<OperandCopy> parts;
    int64_t offset = 0;
    for (size_t k = 0; k < s.out.size(); ++k) {
      const TensorDesc& out = *s.out[k];
      parts.push_back({part_copy(out.dims, whole, axis, offset, dtype_size(out.dtype), false), 0, k});
      offset += out.dims[axis];
    }
    return parts;
  }

 private:
  int64_t axis_;
};

GatherShape gather_shape(const std::vector<int64_t>& data, const TensorDesc& indices, int64_t axis_attr, DType type) {
  GatherShape g;
  const size_t axis = static_cast<size_t>(normalize_axis(axis_attr, data.size()));
  for (size_t d = 0; d < axis; ++d) g.outer *= data[d];
  g.axis = data[axis];
  for (size_t d = axis + 1; d < data.size(); ++d) g.inner *= data[d];
  g.m = indices.numel();
  g.index_type = indices.dtype;
  g.type = type;
  g.elem_bytes = dtype_size(type);
  return g;
}

class Gather final : public CudaOp {
 public:
  Gather(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const GatherShape g = gather_shape(s.in[0]->dims, *s.in[1], axis_, s.in[0]->dtype);
    return std::make_unique<PreparedFunction>([g](const OpBuffers& b, DeviceContext& ctx) {
      gather(g, b.in[0], b.in[1], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }

 private:
  int64_t axis_;
};

// ai.onnx_amp GatherGrad(dY, shape, indices): dData of Gather's data shape.
class GatherGrad final : public CudaOp {
 public:
  GatherGrad(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const GatherShape g = gather_shape(s.out[0]->dims, *s.in[2], axis_, s.out[0]->dtype);
    return std::make_unique<PreparedFunction>(
        [g](const OpBuffers& b, DeviceContext& ctx) {
          scatter_add(g, b.in[0], b.in[2], b.out[0], b.workspace, ctx.sm_count(), ctx.stream());
        },
        scatter_add_workspace(g));
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<CudaOpEntry>& data_movement_ops() {
  static const std::vector<CudaOpEntry> ops = {
      {"", "Reshape", make_op<SameBytes>},    {"", "Flatten", make_op<SameBytes>},
      {"", "Squeeze", make_op<SameBytes>},    {"", "Unsqueeze", make_op<SameBytes>},
      {"", "Identity", make_op<SameBytes>},   {"", "Transpose", make_op<Transpose>},
      {"", "Slice", make_op<Slice>},          {"", "Expand", make_op<Expand>},
      {"", "Concat", make_op<Concat>},        {"", "Split", make_op<Split>},
      {"", "Gather", make_op<Gather>},        {kAmpDomain, "SliceGrad", make_op<SliceGrad>},
      {kAmpDomain, "GatherGrad", make_op<GatherGrad>},
      {"", "Tile", make_op<Tile>},            {"", "DepthToSpace", make_op<DepthSpace>},
      {"", "SpaceToDepth", make_op<DepthSpace>},
  };
  return ops;
}

}  // namespace amp::cuda
