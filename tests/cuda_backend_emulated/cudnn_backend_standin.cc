// A host stand-in of the part of cuDNN's backend (graph) API (cudnn_graph.h) that
// backends/cuda/cudnn_convolution_graph.cc calls, written from cuDNN's documentation of the
// descriptors and of the graph patterns of its fusion engines:
//
//  - descriptors: cudnnBackendCreateDescriptor / SetAttribute / GetAttribute / Finalize /
//    DestroyDescriptor for TENSOR (data type, dims, strides, unique id, alignment, virtual),
//    CONVOLUTION (compute type, mode, pads, strides, dilations, spatial dims), POINTWISE (ADD, MUL,
//    RELU_FWD, math precision), the operations CONVOLUTION_FORWARD, CONVOLUTION_BACKWARD_FILTER,
//    POINTWISE and GEN_STATS, OPERATIONGRAPH, ENGINEHEUR, ENGINECFG, EXECUTION_PLAN and
//    VARIANT_PACK. A set on a finalized descriptor, a finalize with a required attribute missing
//    and an attribute of the wrong type are CUDNN_STATUS_BAD_PARAM, as documented;
//  - the engine heuristic offers one engine for the patterns of cuDNN's convolution fusions with
//    batch norm (ConvBNfprop: [scale, bias, ReLU on X ->] convolution forward [-> GenStats of Y],
//    and ConvBNwgrad: scale, bias, ReLU on X -> convolution backward filter), 16-bit X, W and Y
//    with fp32 per-channel operands and statistics, and none for anything else;
//    AMP_STANDIN_CUDNN_REFUSE_GRAPH=1 makes it offer none for any graph, as a real cuDNN does
//    where no engine takes the graph (an architecture, a layout or a type it does not fuse);
//  - execution: the operations in the graph's order, every value computed in fp32 and rounded to
//    its tensor's data type once (a virtual tensor too: the ReLU's result a 16-bit convolution
//    reads is rounded to the convolution's input type, as the Tensor Cores read it), convolutions
//    summed in fp32 in a fixed order, GenStats' sums of Y as stored (rounded), in fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

struct StandinAttribute {
  cudnnBackendAttributeType_t type{};
  std::vector<char> bytes;  // count elements of `type`
  int64_t count = 0;
};

struct StandinDescriptor {
  cudnnBackendDescriptorType_t kind{};
  bool finalized = false;
  std::map<int, StandinAttribute> attrs;
};

namespace {

size_t element_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
      return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE:
      return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN:
      return sizeof(bool);
    case CUDNN_TYPE_INT64:
      return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT:
      return sizeof(float);
    case CUDNN_TYPE_DOUBLE:
      return sizeof(double);
    case CUDNN_TYPE_VOID_PTR:
      return sizeof(void*);
    case CUDNN_TYPE_CONVOLUTION_MODE:
      return sizeof(cudnnConvolutionMode_t);
    case CUDNN_TYPE_HEUR_MODE:
      return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_POINTWISE_MODE:
      return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
      return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_GENSTATS_MODE:
      return sizeof(cudnnGenStatsMode_t);
    default:
      return 0;
  }
}

StandinDescriptor* of(cudnnBackendDescriptor_t d) { return reinterpret_cast<StandinDescriptor*>(d); }

template <class T>
std::vector<T> values(const StandinDescriptor& d, int name) {
  auto it = d.attrs.find(name);
  if (it == d.attrs.end()) return {};
  std::vector<T> out(static_cast<size_t>(it->second.count));
  std::memcpy(out.data(), it->second.bytes.data(), out.size() * sizeof(T));
  return out;
}
template <class T>
bool value(const StandinDescriptor& d, int name, T* out) {
  const std::vector<T> v = values<T>(d, name);
  if (v.size() != 1) return false;
  *out = v[0];
  return true;
}
StandinDescriptor* linked(const StandinDescriptor& d, int name) {
  cudnnBackendDescriptor_t p = nullptr;
  return value(d, name, &p) ? of(p) : nullptr;
}

bool sixteen_bit(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }

float ld(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return static_cast<const float*>(p)[i];
    case CUDNN_DATA_HALF:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
float rounded(float v, cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_HALF:
      return __half2float(__float2half_rn(v));
    case CUDNN_DATA_BFLOAT16:
      return __bfloat162float(__float2bfloat16_rn(v));
    default:
      return v;
  }
}
void st(void* p, cudnnDataType_t t, int64_t i, float v) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      static_cast<float*>(p)[i] = v;
      break;
    case CUDNN_DATA_HALF:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
  }
}

// A finalized tensor descriptor's facts.
struct TensorInfo {
  cudnnDataType_t type{};
  std::vector<int64_t> dims, strides;
  int64_t uid = 0;
  bool is_virtual = false;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

bool tensor_info(const StandinDescriptor* d, TensorInfo* t) {
  if (!d || d->kind != CUDNN_BACKEND_TENSOR_DESCRIPTOR || !d->finalized) return false;
  value(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, &t->type);
  t->dims = values<int64_t>(*d, CUDNN_ATTR_TENSOR_DIMENSIONS);
  t->strides = values<int64_t>(*d, CUDNN_ATTR_TENSOR_STRIDES);
  value(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, &t->uid);
  uint8_t is_virtual = 0;  // a bool attribute (vector<bool> has no data())
  static_assert(sizeof(bool) == 1, "bool attributes are read as bytes");
  value(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, &is_virtual);
  t->is_virtual = is_virtual != 0;
  return true;
}

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

// Attributes a finalize requires, per kind.
const std::map<int, std::vector<int>>& required() {
  static const std::map<int, std::vector<int>> r = {
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR,
       {CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_ATTR_TENSOR_STRIDES,
        CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT}},
      {CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
       {CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_ATTR_CONVOLUTION_DILATIONS,
        CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
        CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS}},
      {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, {CUDNN_ATTR_POINTWISE_MODE, CUDNN_ATTR_POINTWISE_MATH_PREC}},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW}},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
       {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
        CUDNN_ATTR_OPERATION_POINTWISE_YDESC}},
      {CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR,
       {CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC,
        CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC}},
      {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_ATTR_OPERATIONGRAPH_OPS}},
      {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH}},
      {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
       {CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG}},
      {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
       {CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS}},
  };
  return r;
}

std::vector<StandinDescriptor*> graph_ops(const StandinDescriptor& graph) {
  std::vector<StandinDescriptor*> ops;
  for (cudnnBackendDescriptor_t d : values<cudnnBackendDescriptor_t>(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS))
    ops.push_back(of(d));
  return ops;
}

cudnnPointwiseMode_t pointwise_mode(const StandinDescriptor& op) {
  cudnnPointwiseMode_t m{};
  if (StandinDescriptor* pw = linked(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR))
    value(*pw, CUDNN_ATTR_POINTWISE_MODE, &m);
  return m;
}

// Whether an engine of the fusion engines takes the graph: [MUL, ADD, RELU_FWD on X ->]
// convolution forward [-> GenStats of Y], or MUL, ADD, RELU_FWD on X -> convolution backward
// filter; 16-bit X, W, Y, dY and dW; the per-channel operands and statistics fp32.
bool fusion_engine_takes(const StandinDescriptor& graph) {
  if (const char* v = std::getenv("AMP_STANDIN_CUDNN_REFUSE_GRAPH"); v && std::string(v) == "1") return false;
  std::vector<cudnnPointwiseMode_t> pointwise;
  int convolutions = 0, genstats = 0;
  for (StandinDescriptor* op : graph_ops(graph)) {
    auto roles = operation_roles().find(op->kind);
    if (roles == operation_roles().end()) return false;
    if (op->kind == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
      if (convolutions) return false;  // a prologue only
      pointwise.push_back(pointwise_mode(*op));
      continue;
    }
    if (op->kind == CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR) {
      ++genstats;
      TensorInfo sum, sq;
      if (!tensor_info(linked(*op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC), &sum) ||
          !tensor_info(linked(*op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC), &sq) || sum.type != CUDNN_DATA_FLOAT ||
          sq.type != CUDNN_DATA_FLOAT)
        return false;
      continue;
    }
    ++convolutions;
    for (int role : roles->second.in) {
      TensorInfo t;
      if (!tensor_info(linked(*op, role), &t) || !sixteen_bit(t.type)) return false;
    }
    TensorInfo y;
    if (!tensor_info(linked(*op, roles->second.out[0]), &y) || !sixteen_bit(y.type)) return false;
    if (op->kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR && pointwise.empty()) return false;
  }
  const std::vector<cudnnPointwiseMode_t> prologue = {CUDNN_POINTWISE_MUL, CUDNN_POINTWISE_ADD,
                                                      CUDNN_POINTWISE_RELU_FWD};
  return convolutions == 1 && genstats <= 1 && (pointwise.empty() || pointwise == prologue) &&
         (pointwise.size() || genstats);
}

// A tensor's values while a graph runs: its device memory, or (virtual) fp32 values in row-major
// order of its dims, already rounded to its type.
struct Bound {
  TensorInfo t;
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
    return t.is_virtual ? held[static_cast<size_t>(o)] : ld(data, t.type, o);
  }
  void set(const std::vector<int64_t>& idx, float v) {
    const int64_t o = offset(idx);
    if (t.is_virtual)
      held[static_cast<size_t>(o)] = rounded(v, t.type);
    else
      st(data, t.type, o, v);
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
ConvGeometry geometry(const StandinDescriptor& conv) {
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

bool run_graph(const StandinDescriptor& graph, const std::map<int64_t, void*>& pointers) {
  std::map<int64_t, Bound> bound;
  auto bind = [&](StandinDescriptor* d) -> Bound* {
    TensorInfo t;
    if (!tensor_info(d, &t)) return nullptr;
    auto it = bound.find(t.uid);
    if (it != bound.end()) return &it->second;
    Bound b;
    b.t = t;
    if (t.is_virtual) {
      b.held.assign(static_cast<size_t>(t.count()), 0.0f);
    } else {
      auto p = pointers.find(t.uid);
      if (p == pointers.end() || !p->second) return nullptr;
      b.data = p->second;
    }
    return &bound.emplace(t.uid, std::move(b)).first->second;
  };
  for (StandinDescriptor* op : graph_ops(graph)) {
    const OperationRoles& roles = operation_roles().at(op->kind);
    std::vector<Bound*> in, out;
    for (int r : roles.in) in.push_back(linked(*op, r) ? bind(linked(*op, r)) : nullptr);
    for (int r : roles.out) out.push_back(bind(linked(*op, r)));
    for (Bound* b : out)
      if (!b) return false;
    if (!in[0]) return false;
    std::vector<int64_t> idx;
    if (op->kind == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
      const cudnnPointwiseMode_t mode = pointwise_mode(*op);
      Bound& y = *out[0];
      for (int64_t e = 0; e < y.t.count(); ++e) {
        unravel(e, y.t.dims, idx);
        const float a = in[0]->get_broadcast(idx);
        const float b = in[1] ? in[1]->get_broadcast(idx) : 0.0f;
        y.set(idx, mode == CUDNN_POINTWISE_MUL ? a * b : mode == CUDNN_POINTWISE_ADD ? a + b : (a > 0.0f ? a : 0.0f));
      }
    } else if (op->kind == CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR) {
      const Bound& x = *in[0];
      const int64_t channels = x.t.dims[1];
      std::vector<float> sum(static_cast<size_t>(channels), 0.0f), sq(static_cast<size_t>(channels), 0.0f);
      for (int64_t e = 0; e < x.t.count(); ++e) {
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
      const bool forward = op->kind == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
      StandinDescriptor* conv = linked(*op, forward ? CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC
                                                    : CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC);
      if (!conv) return false;
      const ConvGeometry g = geometry(*conv);
      Bound& x = *in[0];
      Bound& w = forward ? *in[1] : *out[0];  // W, or dW
      Bound& y = forward ? *out[0] : *in[1];  // Y, or dY
      Bound& acc_of = forward ? y : w;
      std::vector<float> acc(static_cast<size_t>(acc_of.t.count()), 0.0f);
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
      for (int64_t e = 0; e < acc_of.t.count(); ++e) {
        unravel(e, acc_of.t.dims, idx);
        acc_of.set(idx, acc[static_cast<size_t>(e)]);
      }
    }
  }
  return true;
}

}  // namespace

#pragma GCC diagnostic ignored "-Wunused-parameter"

extern "C" {

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t kind, cudnnBackendDescriptor_t* descriptor) {
  if (!descriptor) return CUDNN_STATUS_BAD_PARAM;
  auto* d = new StandinDescriptor;
  d->kind = kind;
  *descriptor = reinterpret_cast<cudnnBackendDescriptor_t>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  delete of(descriptor);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void* elements) {
  StandinDescriptor* d = of(descriptor);
  const size_t size = element_size(type);
  if (!d || d->finalized || count < 0 || !size || (count && !elements)) return CUDNN_STATUS_BAD_PARAM;
  StandinAttribute& a = d->attrs[name];
  a.type = type;
  a.count = count;
  a.bytes.assign(static_cast<const char*>(elements),
                 static_cast<const char*>(elements) + size * static_cast<size_t>(count));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  StandinDescriptor* d = of(descriptor);
  if (!d || d->finalized) return CUDNN_STATUS_BAD_PARAM;
  if (auto r = required().find(d->kind); r != required().end())
    for (int name : r->second)
      if (!d->attrs.count(name)) return CUDNN_STATUS_BAD_PARAM;
  if (d->kind == CUDNN_BACKEND_TENSOR_DESCRIPTOR &&
      values<int64_t>(*d, CUDNN_ATTR_TENSOR_DIMENSIONS).size() != values<int64_t>(*d, CUDNN_ATTR_TENSOR_STRIDES).size())
    return CUDNN_STATUS_BAD_PARAM;
  if (d->kind == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && !d->attrs.count(CUDNN_ATTR_ENGINECFG_ENGINE))
    return CUDNN_STATUS_BAD_PARAM;
  if (d->kind == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
    StandinDescriptor* cfg = linked(*d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
    if (!cfg || !cfg->finalized) return CUDNN_STATUS_BAD_PARAM;
  }
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t* count,
                                       void* elements) {
  StandinDescriptor* d = of(descriptor);
  if (!d || !d->finalized) return CUDNN_STATUS_BAD_PARAM;
  // The heuristic's results: one engine configuration (into the caller's ENGINECFG descriptor,
  // which the caller created) when an engine takes the graph, else none.
  if (d->kind == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    StandinDescriptor* graph = linked(*d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || !graph || !count) return CUDNN_STATUS_BAD_PARAM;
    *count = fusion_engine_takes(*graph) ? 1 : 0;
    if (*count && requested >= 1) {
      StandinDescriptor* cfg = of(static_cast<cudnnBackendDescriptor_t*>(elements)[0]);
      if (!cfg || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
      cudnnBackendDescriptor_t g = reinterpret_cast<cudnnBackendDescriptor_t>(graph);
      StandinAttribute& a = cfg->attrs[CUDNN_ATTR_ENGINECFG_ENGINE];
      a.type = CUDNN_TYPE_BACKEND_DESCRIPTOR;
      a.count = 1;
      a.bytes.assign(reinterpret_cast<const char*>(&g), reinterpret_cast<const char*>(&g) + sizeof g);
      cfg->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->kind == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
    if (type != CUDNN_TYPE_INT64 || !elements) return CUDNN_STATUS_BAD_PARAM;
    *static_cast<int64_t*>(elements) = 0;  // the stand-in computes on the host
    if (count) *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  auto it = d->attrs.find(name);
  if (it == d->attrs.end() || it->second.type != type || !count) return CUDNN_STATUS_BAD_PARAM;
  *count = it->second.count;
  const int64_t n = std::min(requested, it->second.count);
  if (n > 0 && elements) std::memcpy(elements, it->second.bytes.data(), static_cast<size_t>(n) * element_size(type));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  StandinDescriptor* p = of(plan);
  StandinDescriptor* v = of(pack);
  if (!p || !v || !p->finalized || !v->finalized || p->kind != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    return CUDNN_STATUS_BAD_PARAM;
  StandinDescriptor* cfg = linked(*p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  StandinDescriptor* graph = cfg ? linked(*cfg, CUDNN_ATTR_ENGINECFG_ENGINE) : nullptr;
  const std::vector<int64_t> uids = values<int64_t>(*v, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const std::vector<void*> ptrs = values<void*>(*v, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (!graph || uids.size() != ptrs.size()) return CUDNN_STATUS_BAD_PARAM;
  std::map<int64_t, void*> pointers;
  for (size_t i = 0; i < uids.size(); ++i) pointers[uids[i]] = ptrs[i];
  cudaStream_t stream = nullptr;
  cudnnGetStream(handle, &stream);
  // The graph's descriptors stay alive while the plan does (the caller keeps them).
  const StandinDescriptor* g = graph;
  const cudaError_t e = amp_standin::enqueue(stream, [g, pointers] {
    if (!run_graph(*g, pointers)) amp_standin::set_last_error(cudaErrorLaunchFailure);
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
