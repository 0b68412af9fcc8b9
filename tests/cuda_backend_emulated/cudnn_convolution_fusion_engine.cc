// The stand-in cuDNN's convolution fusion engine (the graphs backends/cuda/cudnn_convolution_graph.cc
// builds), written from cuDNN's documentation of the graph patterns of its fusion engines:
//
//  - the engine takes the patterns of cuDNN's convolution fusions with batch norm (ConvBNfprop:
//    [scale, bias, ReLU on X ->] convolution forward [-> GenStats of Y], and ConvBNwgrad: scale,
//    bias, ReLU on X -> convolution backward filter), 16-bit X, W and Y with fp32 per-channel
//    operands and statistics, and none else; the convolution's X, W and Y (dY, dW) fully packed
//    in one layout: NCHW with a KCRS filter, or NHWC with a KRSC filter (strides C, 1, W*C, C —
//    the layout of cuDNN's ConvBNfprop and ConvBNwgrad samples, CUDNN_TENSOR_NHWC's filter order),
//    a dim of extent 1 taking any stride; AMP_STANDIN_CUDNN_REFUSE_GRAPH=1 makes it take no
//    graph, as a real cuDNN offers no engine where none fuses the graph (an architecture, a
//    layout or a type it does not fuse);
//  - execution: the operations in the graph's order, each tensor in memory addressed through its
//    strides (a virtual one held row-major), every value computed in fp32 and rounded to
//    its tensor's data type once (a virtual tensor too: the ReLU's result a 16-bit convolution
//    reads is rounded to the convolution's input type, as the Tensor Cores read it), convolutions
//    summed in fp32 in a fixed order, GenStats' sums of Y as stored (rounded), in fp32.
#include <cudnn.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/cudnn_backend_descriptors.h"

namespace amp_standin::cudnn_backend {

namespace {

// The attributes an operation names its tensors by, per kind: inputs, then outputs.
struct OperationRoles {
  std::vector<int> in, out;
};
const std::map<int, OperationRoles>& operation_roles() {
  static const std::map<int, OperationRoles> roles = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}}},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW}}},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_BDESC},
        {CUDNN_ATTR_OPERATION_POINTWISE_YDESC}}},
      {CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR,
       {{CUDNN_ATTR_OPERATION_GENSTATS_XDESC},
        {CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC}}},
  };
  return roles;
}

bool is_convolution(const Descriptor& op) {
  return op.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
         op.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}

cudnnPointwiseMode_t pointwise_mode(const Descriptor& op) {
  const Descriptor* pw = desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
  return pw ? value<cudnnPointwiseMode_t>(*pw, CUDNN_ATTR_POINTWISE_MODE) : cudnnPointwiseMode_t{};
}

// A finalized tensor descriptor linked by `attr`, or false.
bool tensor_at(const Descriptor& op, int attr, Tensor* t) {
  const Descriptor* d = desc(op, attr);
  if (!d || d->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR || !d->finalized) return false;
  *t = tensor_of(d);
  return true;
}

// A tensor's values while a graph runs: its device memory, or (virtual) fp32 values in row-major
// order of its dims, already rounded to its type.
struct Bound {
  Tensor t;
  void* data = nullptr;
  std::vector<float> held;
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t o = 0;
    if (t.is_virtual) {
      for (size_t d = 0; d < idx.size(); ++d) o = o * t.dims[d] + idx[d];
      return o;
    }
    for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * t.strides[d];
    return o;
  }
  float get(const std::vector<int64_t>& idx) const {
    const int64_t o = offset(idx);
    return t.is_virtual ? held[static_cast<size_t>(o)] : load(data, t.type, o);
  }
  void set(const std::vector<int64_t>& idx, float v) {
    const int64_t o = offset(idx);
    if (t.is_virtual)
      held[static_cast<size_t>(o)] = rounded(v, t.type);
    else
      store(data, t.type, o, v);
  }
  // The value broadcast to `idx` (dims of extent 1 repeat).
  float get_broadcast(const std::vector<int64_t>& idx) const {
    std::vector<int64_t> own(idx.size());
    for (size_t d = 0; d < idx.size(); ++d) own[d] = t.dims[d] == 1 ? 0 : idx[d];
    return get(own);
  }
};

void unravel(int64_t i, const std::vector<int64_t>& dims, std::vector<int64_t>& idx) {
  idx.resize(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
}

struct ConvGeometry {
  std::vector<int64_t> pad, stride, dil;
};
ConvGeometry geometry(const Descriptor& conv) {
  return {values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
          values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
          values<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS)};
}

// fn(x index, w index, y index) for every (output element, filter tap) inside x.
template <class F>
void for_each_tap(const std::vector<int64_t>& xd, const std::vector<int64_t>& wd, const std::vector<int64_t>& yd,
                  const ConvGeometry& g, F&& fn) {
  const size_t nd = xd.size();
  std::vector<int64_t> yi, wi(nd), xi(nd), taps(wd.begin() + 1, wd.end()), ti;
  int64_t ny = 1, nt = 1;
  for (int64_t d : yd) ny *= d;
  for (int64_t d : taps) nt *= d;
  for (int64_t e = 0; e < ny; ++e) {
    unravel(e, yd, yi);
    for (int64_t t = 0; t < nt; ++t) {
      unravel(t, taps, ti);  // [c, r...]
      bool inside = true;
      xi[0] = yi[0];
      xi[1] = ti[0];
      wi[0] = yi[1];
      wi[1] = ti[0];
      for (size_t d = 2; d < nd && inside; ++d) {
        wi[d] = ti[d - 1];
        xi[d] = yi[d] * g.stride[d - 2] - g.pad[d - 2] + ti[d - 1] * g.dil[d - 2];
        inside = xi[d] >= 0 && xi[d] < xd[d];
      }
      if (inside) fn(xi, wi, yi);
    }
  }
}

// Whether t's strides are those of its dims fully packed row-major (channels_last false) or
// channels-last (C innermost, then the spatial dims, N outermost); a dim of extent 1 may have any.
bool packed_as(const Tensor& t, bool channels_last) {
  const size_t n = t.dims.size();
  if (n < 3 || t.strides.size() != n) return !channels_last && n == t.strides.size();
  std::vector<int64_t> want(n, 1);
  if (channels_last) {
    int64_t step = t.dims[1];
    for (size_t d = n; d-- > 2;) {
      want[d] = step;
      step *= t.dims[d];
    }
    want[0] = step;
  } else {
    for (size_t d = n; d-- > 1;) want[d - 1] = want[d] * t.dims[d];
  }
  for (size_t d = 0; d < n; ++d)
    if (t.dims[d] != 1 && t.strides[d] != want[d]) return false;
  return true;
}

}  // namespace

bool is_convolution_graph(const Descriptor& graph) {
  for (const Descriptor* op : operations(graph))
    if (op && is_convolution(*op)) return true;
  return false;
}

// [MUL, ADD, RELU_FWD on X ->] convolution forward [-> GenStats of Y], or MUL, ADD, RELU_FWD on
// X -> convolution backward filter; 16-bit X, W, Y, dY and dW; the per-channel operands and
// statistics fp32.
bool convolution_fusion_takes(const Descriptor& graph) {
  if (const char* v = std::getenv("AMP_STANDIN_CUDNN_REFUSE_GRAPH"); v && std::string(v) == "1") return false;
  std::vector<cudnnPointwiseMode_t> pointwise;
  int convolutions = 0, genstats = 0;
  for (const Descriptor* op : operations(graph)) {
    auto roles = operation_roles().find(op->type);
    if (roles == operation_roles().end()) return false;
    if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
      if (convolutions) return false;  // a prologue only
      pointwise.push_back(pointwise_mode(*op));
      continue;
    }
    if (op->type == CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR) {
      ++genstats;
      Tensor sum, sq;
      if (!tensor_at(*op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, &sum) ||
          !tensor_at(*op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, &sq) || sum.type != CUDNN_DATA_FLOAT ||
          sq.type != CUDNN_DATA_FLOAT)
        return false;
      continue;
    }
    ++convolutions;
    std::vector<Tensor> operands(3);
    for (size_t r = 0; r < 2; ++r)
      if (!tensor_at(*op, roles->second.in[r], &operands[r]) || !is_16bit(operands[r].type)) return false;
    if (!tensor_at(*op, roles->second.out[0], &operands[2]) || !is_16bit(operands[2].type)) return false;
    bool nchw = true, nhwc = true;
    for (const Tensor& t : operands) {
      nchw = nchw && packed_as(t, false);
      nhwc = nhwc && packed_as(t, true);
    }
    if (!nchw && !nhwc) return false;
    if (op->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR && pointwise.empty()) return false;
  }
  const std::vector<cudnnPointwiseMode_t> prologue = {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD,
                                                      CUDNN_POINTWISE_RELU_FWD};
  return convolutions == 1 && genstats <= 1 && (pointwise.empty() || pointwise == prologue) &&
         (pointwise.size() || genstats);
}

bool convolution_fusion_run(const Descriptor& graph, const std::map<int64_t, void*>& pointers) {
  std::map<int64_t, Bound> bound;
  auto bind = [&](const Descriptor& op, int attr) -> Bound* {
    Tensor t;
    if (!tensor_at(op, attr, &t)) return nullptr;
    auto it = bound.find(t.uid);
    if (it != bound.end()) return &it->second;
    Bound b;
    b.t = t;
    if (t.is_virtual) {
      b.held.assign(static_cast<size_t>(t.numel()), 0.0f);
    } else {
      auto p = pointers.find(t.uid);
      if (p == pointers.end() || !p->second) return nullptr;
      b.data = p->second;
    }
    return &bound.emplace(t.uid, std::move(b)).first->second;
  };
  for (const Descriptor* op : operations(graph)) {
    const OperationRoles& roles = operation_roles().at(op->type);
    std::vector<Bound*> in, out;
    for (int r : roles.in) in.push_back(desc(*op, r) ? bind(*op, r) : nullptr);
    for (int r : roles.out) out.push_back(bind(*op, r));
    for (Bound* b : out)
      if (!b) return false;
    if (!in[0]) return false;
    std::vector<int64_t> idx;
    if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
      const cudnnPointwiseMode_t mode = pointwise_mode(*op);
      Bound& y = *out[0];
      for (int64_t e = 0; e < y.t.numel(); ++e) {
        unravel(e, y.t.dims, idx);
        const float a = in[0]->get_broadcast(idx);
        const float b = in[1] ? in[1]->get_broadcast(idx) : 0.0f;
        y.set(idx, mode == CUDNN_POINTWISE_MUL ? a * b : mode == CUDNN_POINTWISE_ADD ? a + b : (a > 0.0f ? a : 0.0f));
      }
    } else if (op->type == CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR) {
      const Bound& x = *in[0];
      const int64_t channels = x.t.dims[1];
      std::vector<float> sum(static_cast<size_t>(channels), 0.0f), sq(static_cast<size_t>(channels), 0.0f);
      for (int64_t e = 0; e < x.t.numel(); ++e) {
        unravel(e, x.t.dims, idx);
        const float v = x.get(idx);
        sum[static_cast<size_t>(idx[1])] += v;
        sq[static_cast<size_t>(idx[1])] += v * v;
      }
      for (int64_t c = 0; c < channels; ++c) {
        std::vector<int64_t> at(x.t.dims.size(), 0);
        at[1] = c;
        out[0]->set(at, sum[static_cast<size_t>(c)]);
        out[1]->set(at, sq[static_cast<size_t>(c)]);
      }
    } else {
      const bool forward = op->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
      const Descriptor* conv = desc(*op, forward ? CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC
                                                 : CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC);
      if (!conv) return false;
      const ConvGeometry g = geometry(*conv);
      Bound& x = *in[0];
      Bound& w = forward ? *in[1] : *out[0];  // W, or dW
      Bound& y = forward ? *out[0] : *in[1];  // Y, or dY
      Bound& acc_of = forward ? y : w;
      std::vector<float> acc(static_cast<size_t>(acc_of.t.numel()), 0.0f);
      auto flat = [](const std::vector<int64_t>& i, const std::vector<int64_t>& dims) {
        int64_t f = 0;
        for (size_t d = 0; d < i.size(); ++d) f = f * dims[d] + i[d];
        return static_cast<size_t>(f);
      };
      for_each_tap(x.t.dims, w.t.dims, y.t.dims, g,
                   [&](const std::vector<int64_t>& xi, const std::vector<int64_t>& wi, const std::vector<int64_t>& yi) {
                     if (forward)
                       acc[flat(yi, y.t.dims)] += x.get(xi) * w.get(wi);
                     else
                       acc[flat(wi, w.t.dims)] += x.get(xi) * y.get(yi);
                   });
      for (int64_t e = 0; e < acc_of.t.numel(); ++e) {
        unravel(e, acc_of.t.dims, idx);
        acc_of.set(idx, acc[static_cast<size_t>(e)]);
      }
    }
  }
  return true;
}

}  // namespace amp_standin::cudnn_backend
