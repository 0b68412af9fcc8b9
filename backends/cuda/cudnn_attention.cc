// The operation graphs of cuDNN's fused attention (cudnn_attention.h), node for node as
// cudnn-frontend 1.10 lowers its sdpa (forward, with Stats for training) and sdpa_backward nodes
// without dropout, ALiBi or sequence lengths: the engines match that pattern, not the maths.
//
// Forward:  S = Q K^T; S *= scale; [S += bias]; [S = select(row >= col, S, lowest)];
//           M = max_row S; E = exp(S - M); Z = sum_row E; Stats = M + log Z; P = E / Z (stored
//           as Q's type); O = P V.
// Backward: D = sum_row(dO * O) * 1 (a tensor of ours: cuDNN reads it back);
//           S as above; E = exp(S - Stats); dV = E^T dO (E^T a reshape, Q's type);
//           dP = (dO V^T) * 1; dS = (dP - D) * E * scale; dK = dS^T Q; dQacc = dS K (fp32, ours,
//           zeroed first); dQ = identity(dQacc).
// The multiplications by a by-value 1 stand where cudnn-frontend puts its dropout scales ("one
// tensor is needed for non-dropout graphs", its comment). Every virtual tensor is fp32 unless said.
#include "backends/cuda/cudnn_attention.h"

#include <cuda_runtime.h>

#include <limits>
#include <stdexcept>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

struct Refused {
  std::string why;
};

void ok(cudnnStatus_t s, const std::string& what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[256] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  throw Refused{what + ": " + cudnnGetErrorString(s) + (detail[0] ? std::string(" (") + detail + ")" : "")};
}

// One backend descriptor, destroyed with the object.
class Backend {
 public:
  Backend(cudnnBackendDescriptorType_t type, std::string what) : what_(std::move(what)) {
    ok(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor(" + what_ + ")");
  }
  ~Backend() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  template <class V>
  void set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, const V* v, int64_t n = 1) {
    ok(cudnnBackendSetAttribute(d_, a, t, n, v), what_ + ": attribute " + std::to_string(static_cast<int>(a)));
  }
  void finalize() { ok(cudnnBackendFinalize(d_), "cudnnBackendFinalize(" + what_ + ")"); }
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(d_); }
  const std::string& what() const { return what_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

std::vector<int64_t> packed(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::kFloat16: return CUDNN_DATA_HALF;
    case DType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: throw Refused{"cuDNN's fused attention takes fp16 and bf16, not " + std::string(dtype_name(t))};
  }
}

}  // namespace

struct CudnnAttention::Descriptors {
  std::vector<std::unique_ptr<Backend>> all;
  Backend& make(cudnnBackendDescriptorType_t t, std::string what) {
    all.push_back(std::make_unique<Backend>(t, std::move(what)));
    return *all.back();
  }
};

namespace {

// Tensors and operations of one graph, in the order cudnn-frontend adds them.
class GraphBuilder {
 public:
  explicit GraphBuilder(CudnnAttention::Descriptors& held) : held_(held) {}

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t t, const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& strides, bool is_virtual = false, bool by_value = false) {
    Backend& d = held_.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + std::to_string(uid));
    const int64_t alignment = 16;
    d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &t);
    d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), static_cast<int64_t>(dims.size()));
    d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), static_cast<int64_t>(strides.size()));
    d.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    d.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    d.finalize();
    return d.get();
  }
  cudnnBackendDescriptor_t tensor(AttentionTensor uid, cudnnDataType_t t, const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& strides) {
    return tensor(static_cast<int64_t>(uid), t, dims, strides);
  }
  // A float passed by value (the variant pack points at the host copy); once per graph.
  cudnnBackendDescriptor_t scalar(AttentionTensor uid) {
    for (const auto& [u, d] : scalars_)
      if (u == uid) return d;
    scalars_.emplace_back(uid, tensor(static_cast<int64_t>(uid), CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false,
                                      true));
    return scalars_.back().second;
  }
  std::vector<AttentionTensor> scalars() const {
    std::vector<AttentionTensor> out;
    for (const auto& [u, d] : scalars_) out.push_back(u);
    return out;
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t t, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& strides) {
    return tensor(next_uid_++, t, dims, strides, true);
  }

  // y = mode(x, [b], [t]); GEN_INDEX along `axis`; computed in `compute`.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
    Backend& pw = held_.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise " + std::to_string(mode));
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &compute);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize();
    Backend& op = held_.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation " + std::to_string(mode));
    cudnnBackendDescriptor_t p = pw.get();
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, &p);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    op.finalize();
    ops_.push_back(op.get());
  }
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    Backend& mm = held_.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    mm.finalize();
    Backend& op = held_.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
    cudnnBackendDescriptor_t m = mm.get();
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &a);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &b);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &c);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &m);
    op.finalize();
    ops_.push_back(op.get());
  }
  void reduction(cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Backend& r = held_.make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &how);
    r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    r.finalize();
    Backend& op = held_.make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
    cudnnBackendDescriptor_t rd = r.get();
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &rd);
    op.finalize();
    ops_.push_back(op.get());
  }
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Backend& op = held_.make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y);
    op.finalize();
    ops_.push_back(op.get());
  }

  Backend& operation_graph(cudnnHandle_t handle) {
    Backend& g = held_.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    g.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(), static_cast<int64_t>(ops_.size()));
    g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    g.finalize();
    return g;
  }

 private:
  CudnnAttention::Descriptors& held_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::vector<std::pair<AttentionTensor, cudnnBackendDescriptor_t>> scalars_;
  int64_t next_uid_ = 100;
};

// The scores' tensors, shared by both directions: S = Q K^T * scale [+ bias] [causal], fp32.
struct Scores {
  cudnnBackendDescriptor_t q, kt, s;
};

Scores scores(GraphBuilder& g, const CudnnAttentionShape& s, cudnnDataType_t t) {
  const int64_t b = s.b, h = s.h, sq = s.sq, skv = s.skv, d = s.d;
  const std::vector<int64_t> dims = {b, h, sq, skv}, strides = packed(dims);
  Scores out;
  out.q = g.tensor(AttentionTensor::kQ, t, {b, h, sq, d}, packed({b, h, sq, d}));
  // K [b, h, skv, d] read as K^T: its last two dims and strides swapped.
  out.kt = g.tensor(AttentionTensor::kK, t, {b, h, d, skv}, {h * skv * d, skv * d, 1, d});
  cudnnBackendDescriptor_t product = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.matmul(out.q, out.kt, product);
  cudnnBackendDescriptor_t last = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_MUL, product, g.scalar(AttentionTensor::kScale), nullptr, last);
  if (!s.bias_dims.empty()) {
    cudnnBackendDescriptor_t bias = g.tensor(AttentionTensor::kBias, t, s.bias_dims, packed(s.bias_dims));
    cudnnBackendDescriptor_t biased = g.virt(CUDNN_DATA_FLOAT, dims, strides);
    g.pointwise(CUDNN_POINTWISE_ADD, last, bias, nullptr, biased);
    last = biased;
  }
  if (s.causal) {
    cudnnBackendDescriptor_t row = g.virt(CUDNN_DATA_INT32, dims, strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, last, nullptr, nullptr, row, 2);
    cudnnBackendDescriptor_t col = g.virt(CUDNN_DATA_INT32, dims, strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, last, nullptr, nullptr, col, 3);
    cudnnBackendDescriptor_t keep = g.virt(CUDNN_DATA_BOOLEAN, dims, strides);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, -1, CUDNN_DATA_BOOLEAN);
    cudnnBackendDescriptor_t masked = g.virt(CUDNN_DATA_FLOAT, dims, strides);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, last, g.scalar(AttentionTensor::kMaskFill), keep, masked);
    last = masked;
  }
  out.s = last;
  return out;
}

void forward_graph(GraphBuilder& g, const CudnnAttentionShape& s) {
  const cudnnDataType_t t = data_type(s.type);
  const int64_t b = s.b, h = s.h, sq = s.sq, skv = s.skv, dv = s.dv;
  const std::vector<int64_t> dims = {b, h, sq, skv}, strides = packed(dims), row = {b, h, sq, 1},
                             row_strides = {h * sq, sq, 1, 1};
  const Scores sc = scores(g, s, t);
  cudnnBackendDescriptor_t v = g.tensor(AttentionTensor::kV, t, {b, h, skv, dv}, packed({b, h, skv, dv}));
  cudnnBackendDescriptor_t o = g.tensor(AttentionTensor::kO, t, {b, h, sq, dv}, packed({b, h, sq, dv}));
  cudnnBackendDescriptor_t stats = g.tensor(AttentionTensor::kStats, CUDNN_DATA_FLOAT, row, row_strides);
  cudnnBackendDescriptor_t m = g.virt(CUDNN_DATA_FLOAT, row, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, sc.s, m);
  cudnnBackendDescriptor_t shifted = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_SUB, sc.s, m, nullptr, shifted);
  cudnnBackendDescriptor_t e = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
  cudnnBackendDescriptor_t z = g.virt(CUDNN_DATA_FLOAT, row, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  cudnnBackendDescriptor_t log_z = g.virt(CUDNN_DATA_FLOAT, row, row_strides);
  g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, log_z);
  g.pointwise(CUDNN_POINTWISE_ADD, m, log_z, nullptr, stats);
  cudnnBackendDescriptor_t p = g.virt(t, dims, strides);  // the probabilities enter P V as Q's type
  g.pointwise(CUDNN_POINTWISE_DIV, e, z, nullptr, p);
  g.matmul(p, v, o);
}

void backward_graph(GraphBuilder& g, const CudnnAttentionShape& s) {
  const cudnnDataType_t t = data_type(s.type);
  const int64_t b = s.b, h = s.h, sq = s.sq, skv = s.skv, d = s.d, dv = s.dv;
  const std::vector<int64_t> dims = {b, h, sq, skv}, strides = packed(dims), row = {b, h, sq, 1},
                             row_strides = {h * sq, sq, 1, 1}, transposed = {h * sq * skv, sq * skv, 1, skv};
  cudnnBackendDescriptor_t o = g.tensor(AttentionTensor::kO, t, {b, h, sq, dv}, packed({b, h, sq, dv}));
  cudnnBackendDescriptor_t d_o = g.tensor(AttentionTensor::kdO, t, {b, h, sq, dv}, packed({b, h, sq, dv}));
  cudnnBackendDescriptor_t stats = g.tensor(AttentionTensor::kStats, CUDNN_DATA_FLOAT, row, row_strides);
  cudnnBackendDescriptor_t one = g.scalar(AttentionTensor::kOne);
  // D = sum_row(dO * O): the virtual product with cudnn-frontend's strides, the sum a tensor of ours.
  cudnnBackendDescriptor_t d_o_o = g.virt(CUDNN_DATA_FLOAT, {b, h, sq, dv}, {h * sq * dv, sq * dv, h * dv, 1});
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, nullptr, d_o_o);
  cudnnBackendDescriptor_t rows = g.virt(CUDNN_DATA_FLOAT, row, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, rows);
  cudnnBackendDescriptor_t softmax_sum = g.tensor(AttentionTensor::kSoftmaxSum, CUDNN_DATA_FLOAT, row, row_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, rows, one, nullptr, softmax_sum);

  const Scores sc = scores(g, s, t);
  cudnnBackendDescriptor_t shifted = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_SUB, sc.s, stats, nullptr, shifted);
  cudnnBackendDescriptor_t p = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, p);
  cudnnBackendDescriptor_t p_t = g.virt(t, {b, h, skv, sq}, transposed);
  g.reshape(p, p_t);
  cudnnBackendDescriptor_t d_v = g.tensor(AttentionTensor::kdV, t, {b, h, skv, dv}, packed({b, h, skv, dv}));
  g.matmul(p_t, d_o, d_v);

  // V [b, h, skv, dv] read as V^T.
  cudnnBackendDescriptor_t v_t = g.tensor(AttentionTensor::kV, t, {b, h, dv, skv}, {h * skv * dv, skv * dv, 1, dv});
  cudnnBackendDescriptor_t d_p = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.matmul(d_o, v_t, d_p);
  cudnnBackendDescriptor_t d_p1 = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_MUL, d_p, one, nullptr, d_p1);
  cudnnBackendDescriptor_t d_p2 = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_SUB, d_p1, softmax_sum, nullptr, d_p2);
  cudnnBackendDescriptor_t d_s0 = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_MUL, d_p2, p, nullptr, d_s0);
  cudnnBackendDescriptor_t d_s = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_MUL, d_s0, g.scalar(AttentionTensor::kScale), nullptr, d_s);

  cudnnBackendDescriptor_t d_s_t = g.virt(t, {b, h, skv, sq}, transposed);
  g.reshape(d_s, d_s_t);
  cudnnBackendDescriptor_t d_k = g.tensor(AttentionTensor::kdK, t, {b, h, skv, d}, packed({b, h, skv, d}));
  g.matmul(d_s_t, sc.q, d_k);

  cudnnBackendDescriptor_t k = g.virt(t, {b, h, skv, d}, {h * skv * d, skv * d, d, 1});
  g.reshape(sc.kt, k);
  cudnnBackendDescriptor_t accumulator =
      g.tensor(AttentionTensor::kdQAccumulator, CUDNN_DATA_FLOAT, {b, h, sq, d}, packed({b, h, sq, d}));
  g.matmul(d_s, k, accumulator);
  cudnnBackendDescriptor_t d_q = g.tensor(AttentionTensor::kdQ, t, {b, h, sq, d}, packed({b, h, sq, d}));
  g.pointwise(CUDNN_POINTWISE_IDENTITY, accumulator, nullptr, nullptr, d_q);
}

}  // namespace

CudnnAttention::~CudnnAttention() = default;

std::unique_ptr<CudnnAttention> CudnnAttention::build(const CudnnAttentionShape& s, bool backward,
                                                      cudnnHandle_t handle, std::string* refusal) {
  std::unique_ptr<CudnnAttention> a(new CudnnAttention());
  a->held_ = std::make_unique<Descriptors>();
  a->scale_ = s.scale;
  a->mask_fill_ = std::numeric_limits<float>::lowest();  // cudnn-frontend's fill: -inf would give NaN rows
  try {
    GraphBuilder g(*a->held_);
    if (backward) {
      backward_graph(g, s);
    } else {
      forward_graph(g, s);
    }
    a->scalars_ = g.scalars();
    Backend& graph = g.operation_graph(handle);
    Backend& heuristics = a->held_->make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
    cudnnBackendDescriptor_t gd = graph.get();
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &gd);
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    heuristics.finalize();
    int64_t count = 0;
    ok(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                &count, nullptr),
       "the engine heuristics' count");
    if (count == 0) throw Refused{"cuDNN's heuristics offer no engine for this graph"};
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i)
      configs.push_back(a->held_->make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration").get());
    ok(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                &count, configs.data()),
       "the engine heuristics' results");
    std::string refused;  // each configuration's answer, for the report when none finalises
    for (int64_t i = 0; i < count && !a->plan_; ++i) {
      Backend& plan = a->held_->make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &configs[i]);
      const cudnnStatus_t st = plan.try_finalize();
      if (st != CUDNN_STATUS_SUCCESS) {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        refused += std::string(refused.empty() ? "" : "; ") + "configuration " + std::to_string(i) + ": " +
                   cudnnGetErrorString(st) + (detail[0] ? std::string(" (") + detail + ")" : "");
        continue;
      }
      int64_t workspace = 0;
      ok(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, nullptr,
                                  &workspace),
         "the execution plan's workspace size");
      Backend& engine = a->held_->make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
      cudnnBackendDescriptor_t ed = engine.get();
      int64_t got = 0, index = -1;
      if (cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                   &ed) == CUDNN_STATUS_SUCCESS)
        cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &index);
      a->plan_ = plan.get();
      a->workspace_ = workspace_aligned(static_cast<size_t>(workspace));
      a->engine_ = "engine " + std::to_string(index) + " (heuristic result " + std::to_string(i) + " of " +
                   std::to_string(count) + ")";
    }
    if (!a->plan_) throw Refused{"no execution plan finalises: " + refused};
  } catch (const Refused& r) {
    *refusal = r.why;
    return nullptr;
  }
  if (backward) {
    a->accumulator_bytes_ = workspace_aligned(static_cast<size_t>(s.b * s.h * s.sq * s.d) * sizeof(float));
    a->extra_bytes_ = a->accumulator_bytes_ + workspace_aligned(static_cast<size_t>(s.b * s.h * s.sq) * sizeof(float));
  }
  return a;
}

void CudnnAttention::execute(cudnnHandle_t handle, cudaStream_t stream,
                             const std::vector<std::pair<AttentionTensor, void*>>& tensors, void* workspace) const {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, p] : tensors) {
    uids.push_back(static_cast<int64_t>(uid));
    pointers.push_back(p);
  }
  // The by-value scalars: cuDNN copies them when the pack is executed.
  for (AttentionTensor uid : scalars_) {
    uids.push_back(static_cast<int64_t>(uid));
    const float* value = uid == AttentionTensor::kScale ? &scale_ : uid == AttentionTensor::kOne ? &one_ : &mask_fill_;
    pointers.push_back(const_cast<float*>(value));
  }
  char* scratch = static_cast<char*>(workspace) + workspace_;
  if (accumulator_bytes_) {
    // cuDNN before 9.6 left zeroing the dQ accumulator to the caller (cudnn-frontend's memset).
    AMP_CUDA_CHECK(cudaMemsetAsync(scratch, 0, accumulator_bytes_, stream));
    uids.push_back(static_cast<int64_t>(AttentionTensor::kdQAccumulator));
    pointers.push_back(scratch);
    uids.push_back(static_cast<int64_t>(AttentionTensor::kSoftmaxSum));
    pointers.push_back(scratch + accumulator_bytes_);
  }
  void* ws = workspace_ ? workspace : nullptr;
  try {
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()));
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
             static_cast<int64_t>(pointers.size()));
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws);
    pack.finalize();
    ok(cudnnBackendExecute(handle, plan_, pack.get()), "cudnnBackendExecute");
  } catch (const Refused& r) {
    throw Error("cuDNN's fused attention (" + engine_ + "): " + r.why);
  }
}

}  // namespace amp::cuda
