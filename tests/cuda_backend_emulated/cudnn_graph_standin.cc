// A host stand-in of cuDNN 9's graph (backend) API as backends/cuda/cudnn_attention.cc calls it,
// written from cuDNN's backend documentation (cudnn_graph.h, "Backend Descriptor Types"):
//
//  - descriptors hold typed attributes (cudnnBackendSetAttribute: the element size of each
//    attribute type; a finalized descriptor takes no more: CUDNN_STATUS_NOT_INITIALIZED... as
//    documented, BAD_PARAM here) and check what their documentation requires at
//    cudnnBackendFinalize: a tensor's data type, dimensions and strides of one rank, unique id and
//    alignment; a pointwise operation's X and Y, B for binary modes, T for BINARY_SELECT, operands
//    that broadcast to Y (dims equal or 1); a matmul's A [.., M, K], B [.., K, N], C [.., M, N];
//    a reduction's Y of X's rank with each dim X's or 1; a reshape's X and Y of one element count;
//    an operation graph's operations, each finalized, and unique ids not repeated;
//  - the engine heuristics (any mode) offer one engine configuration, engine global index 0;
//  - an execution plan finalises only for the support surface cuDNN documents for its fused flash
//    attention on Ampere and Hopper: every non-virtual operand of a matmul fp16 or bf16
//    (CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE otherwise; an fp32 output of ours, the dQ accumulator,
//    excepted) with its unit-stride dim - the head dim d or dv - a multiple of 8 and at most 128
//    (CUDNN_STATUS_NOT_SUPPORTED_SHAPE), and only the operations this file evaluates
//    (CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN); AMP_STANDIN_CUDNN_REFUSE_SDPA=N refuses every plan
//    with status N (e.g. 3002), as a real cuDNN may for shapes its documentation admits. The
//    refusal's text is what cudnnGetLastErrorString answers next;
//  - the plan asks for a workspace of one float per row of the scores (the stand-in's choice: a
//    real engine's size is its own), and cudnnBackendExecute fails with BAD_PARAM unless the
//    variant pack's workspace is device memory of that size, every non-virtual tensor of the
//    graph has a device pointer covering its extent, and every by-value tensor a host pointer;
//  - execution evaluates the graph on the host, operation by operation in dependency order:
//    every tensor dense in fp32 (INT32 and BOOLEAN values exactly), a virtual tensor of a 16-bit
//    type rounded to it (the probabilities that enter P V, P^T and dS^T), matmuls accumulated in
//    fp32 in a fixed order, reductions (ADD, MAX) likewise, a reshape as the same memory read
//    through the other strides (a transpose here), outputs stored once in their type through their
//    strides. By-value scalars are read when cudnnBackendExecute is called.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

namespace {

std::string last_error;

struct Attribute {
  cudnnBackendAttributeType_t type{};
  int64_t count = 0;
  std::vector<unsigned char> bytes;
};

struct Descriptor {
  cudnnBackendDescriptorType_t type{};
  bool finalized = false;
  std::map<int, Attribute> attrs;
  int64_t workspace = 0;  // an execution plan's
};

size_t element_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    case CUDNN_TYPE_DOUBLE: return sizeof(double);
    case CUDNN_TYPE_VOID_PTR: return sizeof(void*);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    default: return sizeof(int);  // the enumerations: data type, pointwise mode, heuristic mode, ...
  }
}

Descriptor* as(cudnnBackendDescriptor_t d) { return static_cast<Descriptor*>(d); }

cudnnStatus_t fail(cudnnStatus_t s, const std::string& why) {
  last_error = why;
  return s;
}

bool has(const Descriptor& d, int a) { return d.attrs.count(a) != 0; }

template <class T>
std::vector<T> values(const Descriptor& d, int a) {
  std::vector<T> out;
  auto it = d.attrs.find(a);
  if (it == d.attrs.end()) return out;
  out.resize(it->second.count);
  std::memcpy(out.data(), it->second.bytes.data(), it->second.bytes.size());
  return out;
}

template <class T>
T value(const Descriptor& d, int a, T otherwise = T{}) {
  auto it = d.attrs.find(a);
  if (it == d.attrs.end() || it->second.count == 0) return otherwise;
  T v;
  std::memcpy(&v, it->second.bytes.data(), sizeof v);
  return v;
}

Descriptor* desc(const Descriptor& d, int a) { return as(value<cudnnBackendDescriptor_t>(d, a, nullptr)); }

// --- tensors ----------------------------------------------------------------------------------

struct Tensor {
  int64_t uid = 0;
  cudnnDataType_t type{};
  std::vector<int64_t> dims, strides;
  bool is_virtual = false, by_value = false;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t x : dims) n *= x;
    return n;
  }
  int64_t extent() const {  // elements of memory spanned
    int64_t e = 1;
    for (size_t i = 0; i < dims.size(); ++i) e += (dims[i] - 1) * strides[i];
    return e;
  }
  // Memory offset of the row-major logical index i.
  int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (size_t a = dims.size(); a-- > 0;) {
      off += (i % dims[a]) * strides[a];
      i /= dims[a];
    }
    return off;
  }
};

Tensor tensor_of(const Descriptor* d) {
  Tensor t;
  t.uid = value<int64_t>(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID);
  t.type = value<cudnnDataType_t>(*d, CUDNN_ATTR_TENSOR_DATA_TYPE);
  t.dims = values<int64_t>(*d, CUDNN_ATTR_TENSOR_DIMENSIONS);
  t.strides = values<int64_t>(*d, CUDNN_ATTR_TENSOR_STRIDES);
  t.is_virtual = value<bool>(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL);
  t.by_value = value<bool>(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE);
  return t;
}

size_t type_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 4;
  }
}

bool is_16bit(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }

float load(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_HALF: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDNN_DATA_INT32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case CUDNN_DATA_BOOLEAN: return static_cast<const bool*>(p)[i] ? 1.0f : 0.0f;
    default: return static_cast<const float*>(p)[i];
  }
}

void store(void* p, cudnnDataType_t t, int64_t i, float v) {
  switch (t) {
    case CUDNN_DATA_HALF: static_cast<__half*>(p)[i] = __float2half(v); break;
    case CUDNN_DATA_BFLOAT16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v); break;
    case CUDNN_DATA_INT32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case CUDNN_DATA_BOOLEAN: static_cast<bool*>(p)[i] = v != 0.0f; break;
    default: static_cast<float*>(p)[i] = v;
  }
}

float rounded(float v, cudnnDataType_t t) {
  if (t == CUDNN_DATA_HALF) return __half2float(__float2half(v));
  if (t == CUDNN_DATA_BFLOAT16) return __bfloat162float(__float2bfloat16(v));
  return v;
}

// Row-major index of `in` (broadcast: dims of 1) for the row-major index i of dims `out`.
int64_t broadcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  int64_t idx = 0, step = 1;
  for (size_t a = out.size(); a-- > 0;) {
    const int64_t c = i % out[a];
    i /= out[a];
    if (in[a] != 1) idx += c * step;
    step *= in[a];
  }
  return idx;
}

bool broadcasts(const Tensor& x, const Tensor& y) {
  if (x.dims.size() != y.dims.size()) return false;
  for (size_t a = 0; a < x.dims.size(); ++a)
    if (x.dims[a] != y.dims[a] && x.dims[a] != 1) return false;
  return true;
}

// --- operations ---------------------------------------------------------------------------------

bool binary(cudnnPointwiseMode_t m) {
  switch (m) {
    case CUDNN_POINTWISE_ADD: case CUDNN_POINTWISE_SUB: case CUDNN_POINTWISE_MUL: case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_CMP_GE: case CUDNN_POINTWISE_CMP_LT: case CUDNN_POINTWISE_LOGICAL_AND:
    case CUDNN_POINTWISE_BINARY_SELECT: return true;
    default: return false;
  }
}

bool evaluated(cudnnPointwiseMode_t m) {
  return binary(m) || m == CUDNN_POINTWISE_EXP || m == CUDNN_POINTWISE_LOG || m == CUDNN_POINTWISE_IDENTITY ||
         m == CUDNN_POINTWISE_GEN_INDEX;
}

struct Op {
  cudnnBackendDescriptorType_t type{};
  std::vector<Tensor> in;  // pointwise X, B, T; matmul A, B; reduction and reshape X
  Tensor out;
  int mode = 0;  // pointwise mode or reduction operator
  int64_t axis = 0;
};

Op op_of(const Descriptor* d) {
  Op op;
  op.type = d->type;
  auto input = [&](int a) {
    if (Descriptor* t = desc(*d, a)) op.in.push_back(tensor_of(t));
  };
  switch (d->type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
      const Descriptor* pw = desc(*d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
      op.mode = value<int>(*pw, CUDNN_ATTR_POINTWISE_MODE);
      op.axis = value<int64_t>(*pw, CUDNN_ATTR_POINTWISE_AXIS);
      input(CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
      input(CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
      input(CUDNN_ATTR_OPERATION_POINTWISE_TDESC);
      op.out = tensor_of(desc(*d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC));
      break;
    }
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
      input(CUDNN_ATTR_OPERATION_MATMUL_ADESC);
      input(CUDNN_ATTR_OPERATION_MATMUL_BDESC);
      op.out = tensor_of(desc(*d, CUDNN_ATTR_OPERATION_MATMUL_CDESC));
      break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
      op.mode = value<int>(*desc(*d, CUDNN_ATTR_OPERATION_REDUCTION_DESC), CUDNN_ATTR_REDUCTION_OPERATOR);
      input(CUDNN_ATTR_OPERATION_REDUCTION_XDESC);
      op.out = tensor_of(desc(*d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC));
      break;
    default:
      input(CUDNN_ATTR_OPERATION_RESHAPE_XDESC);
      op.out = tensor_of(desc(*d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC));
  }
  return op;
}

// What cudnnBackendFinalize checks of each descriptor type (documented requirements).
cudnnStatus_t check_finalize(Descriptor& d) {
  auto need = [&](std::initializer_list<int> attrs) {
    for (int a : attrs)
      if (!has(d, a)) return fail(CUDNN_STATUS_BAD_PARAM, "attribute " + std::to_string(a) + " not set");
    return CUDNN_STATUS_SUCCESS;
  };
  auto finalized = [&](int a) { return desc(d, a) && desc(d, a)->finalized; };
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_ATTR_TENSOR_STRIDES,
                                  CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT}))
        return s;
      const Tensor t = tensor_of(&d);
      if (t.dims.size() != t.strides.size() || t.dims.empty())
        return fail(CUDNN_STATUS_BAD_PARAM, "a tensor's dims and strides differ in rank");
      for (int64_t x : t.dims)
        if (x <= 0) return fail(CUDNN_STATUS_BAD_PARAM, "a tensor dim <= 0");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return need({CUDNN_ATTR_POINTWISE_MODE});
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return need({CUDNN_ATTR_MATMUL_COMP_TYPE});
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return need({CUDNN_ATTR_REDUCTION_OPERATOR});
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
      if (!finalized(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR) || !finalized(CUDNN_ATTR_OPERATION_POINTWISE_XDESC) ||
          !finalized(CUDNN_ATTR_OPERATION_POINTWISE_YDESC))
        return fail(CUDNN_STATUS_BAD_PARAM, "a pointwise operation without a finalized mode, X or Y");
      const Op op = op_of(&d);
      const auto m = static_cast<cudnnPointwiseMode_t>(op.mode);
      const size_t want = m == CUDNN_POINTWISE_BINARY_SELECT ? 3 : binary(m) ? 2 : 1;
      if (op.in.size() != want) return fail(CUDNN_STATUS_BAD_PARAM, "pointwise mode " + std::to_string(m) +
                                                                        " with " + std::to_string(op.in.size()) + " operands");
      for (const Tensor& t : op.in)
        if (!broadcasts(t, op.out)) return fail(CUDNN_STATUS_BAD_PARAM, "a pointwise operand does not broadcast to Y");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
      if (!finalized(CUDNN_ATTR_OPERATION_MATMUL_ADESC) || !finalized(CUDNN_ATTR_OPERATION_MATMUL_BDESC) ||
          !finalized(CUDNN_ATTR_OPERATION_MATMUL_CDESC) || !finalized(CUDNN_ATTR_OPERATION_MATMUL_DESC))
        return fail(CUDNN_STATUS_BAD_PARAM, "a matmul without finalized A, B, C or descriptor");
      const Op op = op_of(&d);
      const Tensor &a = op.in[0], &b = op.in[1], &c = op.out;
      const size_t r = c.dims.size();
      if (a.dims.size() != r || b.dims.size() != r || r < 2 || a.dims[r - 1] != b.dims[r - 2] ||
          a.dims[r - 2] != c.dims[r - 2] || b.dims[r - 1] != c.dims[r - 1])
        return fail(CUDNN_STATUS_BAD_PARAM, "a matmul's A [.., M, K], B [.., K, N], C [.., M, N] do not fit");
      for (size_t i = 0; i + 2 < r; ++i)
        if ((a.dims[i] != c.dims[i] && a.dims[i] != 1) || (b.dims[i] != c.dims[i] && b.dims[i] != 1))
          return fail(CUDNN_STATUS_BAD_PARAM, "a matmul's batch dims do not broadcast");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
      if (!finalized(CUDNN_ATTR_OPERATION_REDUCTION_XDESC) || !finalized(CUDNN_ATTR_OPERATION_REDUCTION_YDESC) ||
          !finalized(CUDNN_ATTR_OPERATION_REDUCTION_DESC))
        return fail(CUDNN_STATUS_BAD_PARAM, "a reduction without finalized X, Y or descriptor");
      const Op op = op_of(&d);
      if (!broadcasts(op.out, op.in[0])) return fail(CUDNN_STATUS_BAD_PARAM, "a reduction's Y is not X's dims or 1");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
      if (!finalized(CUDNN_ATTR_OPERATION_RESHAPE_XDESC) || !finalized(CUDNN_ATTR_OPERATION_RESHAPE_YDESC))
        return fail(CUDNN_STATUS_BAD_PARAM, "a reshape without finalized X or Y");
      const Op op = op_of(&d);
      if (op.in[0].numel() != op.out.numel()) return fail(CUDNN_STATUS_BAD_PARAM, "a reshape changes the element count");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_OPERATIONGRAPH_OPS})) return s;
      for (cudnnBackendDescriptor_t o : values<cudnnBackendDescriptor_t>(d, CUDNN_ATTR_OPERATIONGRAPH_OPS))
        if (!as(o)->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "an operation of the graph is not finalized");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      if (!finalized(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)) return fail(CUDNN_STATUS_BAD_PARAM, "no finalized graph");
      return need({CUDNN_ATTR_ENGINEHEUR_MODE});
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS}))
        return s;
      if (d.attrs[CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS].count != d.attrs[CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS].count)
        return fail(CUDNN_STATUS_BAD_PARAM, "a variant pack's ids and pointers differ in count");
      return CUDNN_STATUS_SUCCESS;
    }
    default: return CUDNN_STATUS_SUCCESS;
  }
}

std::vector<Op> graph_ops(const Descriptor* graph) {
  std::vector<Op> ops;
  for (cudnnBackendDescriptor_t o : values<cudnnBackendDescriptor_t>(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS))
    ops.push_back(op_of(as(o)));
  return ops;
}

// The non-virtual tensors of a graph, by uid.
std::map<int64_t, Tensor> graph_tensors(const std::vector<Op>& ops) {
  std::map<int64_t, Tensor> out;
  for (const Op& op : ops) {
    for (const Tensor& t : op.in)
      if (!t.is_virtual) out[t.uid] = t;
    if (!op.out.is_virtual) out[op.out.uid] = op.out;
  }
  return out;
}

// The documented support surface of the fused attention engines (see the file's comment).
cudnnStatus_t plan_check(const Descriptor* graph) {
  if (const char* refuse = std::getenv("AMP_STANDIN_CUDNN_REFUSE_SDPA"))
    return fail(static_cast<cudnnStatus_t>(std::atoi(refuse)), "AMP_STANDIN_CUDNN_REFUSE_SDPA");
  for (const Op& op : graph_ops(graph)) {
    if (op.type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
        !evaluated(static_cast<cudnnPointwiseMode_t>(op.mode)))
      return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "pointwise mode " + std::to_string(op.mode));
    if (op.type != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) continue;
    for (const Tensor* t : {&op.in[0], &op.in[1], &op.out}) {
      if (t->is_virtual || (t == &op.out && t->type == CUDNN_DATA_FLOAT)) continue;
      if (!is_16bit(t->type))
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "fused attention takes fp16 and bf16 operands");
      for (size_t a = 0; a < t->dims.size(); ++a) {
        if (t->strides[a] != 1 || t->dims[a] == 1) continue;
        if (t->dims[a] % 8 != 0 || t->dims[a] > 128)
          return fail(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, "head dim " + std::to_string(t->dims[a]) +
                                                            ": fused attention takes multiples of 8 up to 128");
      }
    }
  }
  return CUDNN_STATUS_SUCCESS;
}

int64_t plan_workspace(const Descriptor* graph) {
  int64_t rows = 0;
  for (const Op& op : graph_ops(graph))
    if (op.type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)
      rows = std::max(rows, op.out.numel() / op.out.dims.back());
  return rows * static_cast<int64_t>(sizeof(float));
}

// --- evaluation -------------------------------------------------------------------------------------

using Values = std::map<int64_t, std::vector<float>>;

void evaluate(const Op& op, Values& v) {
  const Tensor& y = op.out;
  std::vector<float> out(static_cast<size_t>(y.numel()));
  switch (op.type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
      const auto m = static_cast<cudnnPointwiseMode_t>(op.mode);
      std::vector<const std::vector<float>*> in;
      for (const Tensor& t : op.in) in.push_back(&v.at(t.uid));
      for (int64_t i = 0; i < y.numel(); ++i) {
        auto at = [&](size_t k) { return (*in[k])[broadcast_index(i, y.dims, op.in[k].dims)]; };
        float r = 0;
        switch (m) {
          case CUDNN_POINTWISE_ADD: r = at(0) + at(1); break;
          case CUDNN_POINTWISE_SUB: r = at(0) - at(1); break;
          case CUDNN_POINTWISE_MUL: r = at(0) * at(1); break;
          case CUDNN_POINTWISE_DIV: r = at(0) / at(1); break;
          case CUDNN_POINTWISE_EXP: r = std::exp(at(0)); break;
          case CUDNN_POINTWISE_LOG: r = std::log(at(0)); break;
          case CUDNN_POINTWISE_IDENTITY: r = at(0); break;
          case CUDNN_POINTWISE_CMP_GE: r = at(0) >= at(1) ? 1.0f : 0.0f; break;
          case CUDNN_POINTWISE_CMP_LT: r = at(0) < at(1) ? 1.0f : 0.0f; break;
          case CUDNN_POINTWISE_LOGICAL_AND: r = at(0) != 0 && at(1) != 0 ? 1.0f : 0.0f; break;
          case CUDNN_POINTWISE_BINARY_SELECT: r = at(2) != 0 ? at(0) : at(1); break;
          case CUDNN_POINTWISE_GEN_INDEX: {
            int64_t rest = i;
            for (size_t a = y.dims.size(); a-- > static_cast<size_t>(op.axis) + 1;) rest /= y.dims[a];
            r = static_cast<float>(rest % y.dims[op.axis]);
            break;
          }
          default: break;
        }
        out[i] = r;
      }
      break;
    }
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
      const Tensor &a = op.in[0], &b = op.in[1];
      const std::vector<float>&av = v.at(a.uid), &bv = v.at(b.uid);
      const size_t r = y.dims.size();
      const int64_t m = y.dims[r - 2], n = y.dims[r - 1], k = a.dims[r - 1], batches = y.numel() / (m * n);
      std::vector<int64_t> ybatch(y.dims.begin(), y.dims.end() - 2), abatch(a.dims.begin(), a.dims.end() - 2),
          bbatch(b.dims.begin(), b.dims.end() - 2);
      for (int64_t bi = 0; bi < batches; ++bi) {
        const float* ap = av.data() + broadcast_index(bi, ybatch, abatch) * m * k;
        const float* bp = bv.data() + broadcast_index(bi, ybatch, bbatch) * k * n;
        float* cp = out.data() + bi * m * n;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float acc = 0;
            for (int64_t c = 0; c < k; ++c) acc += ap[i * k + c] * bp[c * n + j];
            cp[i * n + j] = acc;
          }
      }
      break;
    }
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
      const Tensor& x = op.in[0];
      const std::vector<float>& xv = v.at(x.uid);
      const bool max = op.mode == CUDNN_REDUCE_TENSOR_MAX;
      std::fill(out.begin(), out.end(), max ? -INFINITY : 0.0f);
      for (int64_t i = 0; i < x.numel(); ++i) {
        float& o = out[broadcast_index(i, x.dims, y.dims)];
        o = max ? std::max(o, xv[i]) : o + xv[i];
      }
      break;
    }
    default: {  // reshape: X's elements laid out by X's strides, read back by Y's
      const Tensor& x = op.in[0];
      const std::vector<float>& xv = v.at(x.uid);
      std::vector<float> memory(static_cast<size_t>(std::max(x.extent(), y.extent())));
      for (int64_t i = 0; i < x.numel(); ++i) memory[x.offset(i)] = xv[i];
      for (int64_t i = 0; i < y.numel(); ++i) out[i] = memory[y.offset(i)];
    }
  }
  if (y.is_virtual)
    for (float& x : out) x = rounded(x, y.type);
  v[y.uid] = std::move(out);
}

struct Plan {
  std::vector<Op> ops;
  std::map<int64_t, Tensor> tensors;
};

}  // namespace

extern "C" {

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (max_size == 0) return;
  std::strncpy(message, last_error.c_str(), max_size - 1);
  message[max_size - 1] = '\0';
  last_error.clear();
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor) {
  auto* d = new Descriptor();
  d->type = type;
  *descriptor = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  delete as(descriptor);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void* elements) {
  Descriptor* d = as(descriptor);
  if (!d || d->finalized || count < 0 || (count > 0 && !elements))
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendSetAttribute on a finalized descriptor or without elements");
  Attribute a;
  a.type = type;
  a.count = count;
  a.bytes.resize(static_cast<size_t>(count) * element_size(type));
  if (count) std::memcpy(a.bytes.data(), elements, a.bytes.size());
  d->attrs[name] = std::move(a);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  Descriptor* d = as(descriptor);
  if (!d || d->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize twice");
  if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
    const Descriptor* config = desc(*d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
    if (!config || !has(*config, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH))
      return fail(CUDNN_STATUS_BAD_PARAM, "an execution plan without an engine configuration of the heuristics");
    const Descriptor* graph = desc(*config, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    if (cudnnStatus_t s = plan_check(graph)) return s;
    d->attrs[CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH] = config->attrs.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    d->workspace = plan_workspace(graph);
  } else if (cudnnStatus_t s = check_finalize(*d)) {
    return s;
  }
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t* count,
                                       void* elements) {
  const Descriptor* d = as(descriptor);
  if (!d || !d->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute of a descriptor not finalized");
  if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
      type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    if (count) *count = 1;  // one engine: this file's evaluation
    if (requested >= 1) {
      Descriptor* config = as(static_cast<cudnnBackendDescriptor_t*>(elements)[0]);
      if (!config || config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
        return fail(CUDNN_STATUS_BAD_PARAM, "heuristic results into a descriptor that is no engine configuration");
      config->attrs[CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH] = d->attrs.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && name == CUDNN_ATTR_ENGINECFG_ENGINE && requested >= 1) {
    Descriptor* engine = as(*static_cast<cudnnBackendDescriptor_t*>(elements));
    const int64_t index = 0;
    engine->attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = Attribute{CUDNN_TYPE_INT64, 1, std::vector<unsigned char>(8)};
    std::memcpy(engine->attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX].bytes.data(), &index, sizeof index);
    engine->finalized = true;
    if (count) *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
    *static_cast<int64_t*>(elements) = d->workspace;
    if (count) *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  auto it = d->attrs.find(name);
  if (it == d->attrs.end() || it->second.type != type) return fail(CUDNN_STATUS_BAD_PARAM, "no such attribute");
  const int64_t n = std::min(requested, it->second.count);
  if (n > 0) std::memcpy(elements, it->second.bytes.data(), static_cast<size_t>(n) * element_size(type));
  if (count) *count = it->second.count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  const Descriptor* plan = as(executionPlan);
  const Descriptor* pack = as(variantPack);
  if (!plan || !plan->finalized || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !pack || !pack->finalized)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute without a finalized plan and variant pack");
  auto p = std::make_shared<Plan>();
  p->ops = graph_ops(desc(*plan, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH));
  p->tensors = graph_tensors(p->ops);
  const std::vector<int64_t> uids = values<int64_t>(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const std::vector<void*> pointers = values<void*>(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  void* workspace = value<void*>(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, nullptr);
  if (plan->workspace && !amp_standin::is_device_range(workspace, static_cast<size_t>(plan->workspace)))
    return fail(CUDNN_STATUS_BAD_PARAM, "the variant pack's workspace is not " + std::to_string(plan->workspace) +
                                            " bytes of device memory");
  std::map<int64_t, void*> where;
  for (size_t i = 0; i < uids.size(); ++i) where[uids[i]] = pointers[i];
  auto inputs = std::make_shared<Values>();  // by-value scalars, read now
  for (const auto& [uid, t] : p->tensors) {
    auto it = where.find(uid);
    if (it == where.end() || !it->second)
      return fail(CUDNN_STATUS_BAD_PARAM, "the variant pack has no pointer for tensor " + std::to_string(uid));
    if (t.by_value) {
      (*inputs)[uid] = {load(it->second, t.type, 0)};
    } else if (!amp_standin::is_device_range(it->second, static_cast<size_t>(t.extent()) * type_size(t.type))) {
      return fail(CUDNN_STATUS_BAD_PARAM, "tensor " + std::to_string(uid) + " is not in device memory");
    }
  }
  const cudaError_t e = amp_standin::enqueue(amp_standin::cudnn_stream(handle), [p, inputs, where]() {
    Values v = *inputs;
    std::set<int64_t> produced;
    for (const Op& op : p->ops) produced.insert(op.out.uid);
    for (const auto& [uid, t] : p->tensors) {
      if (t.by_value || produced.count(uid)) continue;
      std::vector<float>& x = v[uid];
      x.resize(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) x[i] = load(where.at(uid), t.type, t.offset(i));
    }
    std::vector<bool> done(p->ops.size(), false);
    for (size_t left = p->ops.size(); left > 0;) {
      const size_t before = left;
      for (size_t i = 0; i < p->ops.size(); ++i) {
        if (done[i]) continue;
        bool ready = true;
        for (const Tensor& t : p->ops[i].in) ready = ready && v.count(t.uid);
        if (!ready) continue;
        evaluate(p->ops[i], v);
        done[i] = true;
        --left;
      }
      if (left == before) return;  // a cycle: finalisation would have refused it on a real cuDNN
    }
    for (const auto& [uid, t] : p->tensors) {
      if (t.by_value || !produced.count(uid)) continue;
      const std::vector<float>& x = v.at(uid);
      for (int64_t i = 0; i < t.numel(); ++i) store(where.at(uid), t.type, t.offset(i), x[i]);
    }
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
