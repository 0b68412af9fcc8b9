// The stand-in cuDNN's fused attention engine (the SDPA graphs backends/cuda/cudnn_attention.cc
// builds, the ones cudnn-frontend 1.10 builds), written from cuDNN's documentation of its fused
// flash attention:
//
//  - the engine heuristics (any mode) offer it for every graph without a convolution (engine
//    global index 0; cudnn_backend_standin.cc);
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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/cudnn_backend_descriptors.h"
#include "tests/cuda_backend_emulated/standin.h"

namespace amp_standin::cudnn_backend {

size_t type_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 4;
  }
}

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


namespace {

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

cudnnStatus_t attention_plan_check(const Descriptor& graph) { return plan_check(&graph); }

int64_t attention_workspace(const Descriptor& graph) { return plan_workspace(&graph); }

cudnnStatus_t attention_execute(cudnnHandle_t handle, const Descriptor& graph, int64_t workspace_size,
                                const Descriptor& variant_pack) {
  const Descriptor* pack = &variant_pack;
  auto p = std::make_shared<Plan>();
  p->ops = graph_ops(&graph);
  p->tensors = graph_tensors(p->ops);
  const std::vector<int64_t> uids = values<int64_t>(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const std::vector<void*> pointers = values<void*>(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  void* workspace = value<void*>(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, nullptr);
  if (workspace_size && !amp_standin::is_device_range(workspace, static_cast<size_t>(workspace_size)))
    return fail(CUDNN_STATUS_BAD_PARAM, "the variant pack's workspace is not " + std::to_string(workspace_size) +
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


}  // namespace amp_standin::cudnn_backend
