#include "backends/cuda/cudnn_convolution_graph.h"

#include <algorithm>
#include <array>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/layout_strides.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// The tensors' unique ids in the variant pack; virtual ones from kVirtual up.
enum Uid : int64_t { kX = 1, kW, kY, kScale, kBias, kSum, kSquareSum, kVirtual = 100 };

// [1, C, 1, ...] of rank n.
std::vector<int64_t> per_channel(int64_t channels, size_t n) {
  std::vector<int64_t> d(n, 1);
  d[1] = channels;
  return d;
}

}  // namespace

ConvolutionGraph::~ConvolutionGraph() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

std::unique_ptr<ConvolutionGraph> ConvolutionGraph::build(const ConvolutionGraphSpec& spec, cudnnHandle_t handle,
                                                          std::string* why, std::optional<int64_t> prefer, bool every) {
  std::unique_ptr<ConvolutionGraph> g(new ConvolutionGraph);
  g->spec_ = spec;
  auto make = [&](cudnnBackendDescriptorType_t kind) {
    cudnnBackendDescriptor_t d = nullptr;
    AMP_CUDNN_CHECK(cudnnBackendCreateDescriptor(kind, &d));
    g->owned_.push_back(d);
    return d;
  };
  auto set = [](cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                int64_t count,
                const void* values) { AMP_CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, count, values)); };
  auto tensor = [&](int64_t uid, DType type, const std::vector<int64_t>& dims, bool is_virtual) {
    cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const cudnnDataType_t dt = cudnn_type(type);
    // Every tensor of the graph in the spec's layout, the per-channel ones and the virtual ones
    // between the prologue's operations too (as cuDNN's samples describe them).
    const std::vector<int64_t> strides = layout_strides(dims, spec.channels_last);
    const int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()), dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()), strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    AMP_CUDNN_CHECK(cudnnBackendFinalize(t));
    return t;
  };
  const bool forward = spec.kind == ConvolutionGraphSpec::Kind::kForward;
  const size_t rank = spec.x.size();
  std::vector<cudnnBackendDescriptor_t> ops;
  cudnnBackendDescriptor_t x = tensor(kX, spec.type, spec.x, false);
  int64_t next_virtual = kVirtual;
  if (spec.prologue) {
    cudnnBackendDescriptor_t scale = tensor(kScale, DType::kFloat, per_channel(spec.x[1], rank), false);
    cudnnBackendDescriptor_t bias = tensor(kBias, DType::kFloat, per_channel(spec.x[1], rank), false);
    // fp32 between the pointwise operations, the ReLU's result in X's type (what the convolution reads).
    auto pointwise = [&](cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t in, cudnnBackendDescriptor_t b,
                         DType out_type) {
      cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
      const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
      set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
      set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
      AMP_CUDNN_CHECK(cudnnBackendFinalize(pw));
      cudnnBackendDescriptor_t out = tensor(next_virtual++, out_type, spec.x, true);
      cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in);
      if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out);
      AMP_CUDNN_CHECK(cudnnBackendFinalize(op));
      ops.push_back(op);
      return out;
    };
    cudnnBackendDescriptor_t scaled = pointwise(CUDNN_POINTWISE_MUL, x, scale, DType::kFloat);
    cudnnBackendDescriptor_t shifted = pointwise(CUDNN_POINTWISE_ADD, scaled, bias, DType::kFloat);
    x = pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, spec.type);
  }
  cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t spatial = static_cast<int64_t>(spec.pads.size());
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial, spec.pads.data());
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, spatial, spec.pads.data());
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, spatial, spec.strides.data());
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial, spec.dilations.data());
    AMP_CUDNN_CHECK(cudnnBackendFinalize(conv));
  }
  cudnnBackendDescriptor_t w = tensor(kW, spec.type, spec.w, false);
  cudnnBackendDescriptor_t y = tensor(kY, spec.type, spec.y, false);
  const float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t op = make(forward ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                                             : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  if (forward) {
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  } else {
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
  }
  AMP_CUDNN_CHECK(cudnnBackendFinalize(op));
  ops.push_back(op);
  if (spec.statistics && forward) {
    cudnnBackendDescriptor_t sum = tensor(kSum, DType::kFloat, per_channel(spec.y[1], rank), false);
    cudnnBackendDescriptor_t square = tensor(kSquareSum, DType::kFloat, per_channel(spec.y[1], rank), false);
    cudnnBackendDescriptor_t stats = make(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(stats, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
    set(stats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    set(stats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(stats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sum);
    set(stats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &square);
    AMP_CUDNN_CHECK(cudnnBackendFinalize(stats));
    ops.push_back(stats);
  }
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
      ops.data());
  // cuDNN refuses a graph no engine takes from its operation graph on (a NOT_SUPPORTED status) or offers none.
  auto refused = [&](cudnnStatus_t status, const char* call) {
    if (status == CUDNN_STATUS_SUCCESS) return false;
    if (!cudnn_refused(status)) check_cudnn(status, call, __FILE__, __LINE__);
    *why = std::string(call) + ": " + cudnnGetErrorString(status);
    return true;
  };
  if (refused(cudnnBackendFinalize(graph), "cudnnBackendFinalize(operation graph)")) return nullptr;
  cudnnBackendDescriptor_t heuristic = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (refused(cudnnBackendFinalize(heuristic), "cudnnBackendFinalize(engine heuristic)")) return nullptr;
  // Up to 8 engine configurations, best first.
  constexpr int64_t kOffered = 8;
  std::array<cudnnBackendDescriptor_t, kOffered> configs{};
  for (cudnnBackendDescriptor_t& c : configs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  int64_t offered = 0;
  if (refused(cudnnBackendGetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       kOffered, &offered, configs.data()),
              "the engine heuristic's results"))
    return nullptr;
  // The order to try the offered configurations in: a preferred one first, then the heuristic's.
  const int64_t n = std::min(offered, kOffered);
  std::vector<int64_t> order;
  if (prefer && *prefer >= 0 && *prefer < n) order.push_back(*prefer);
  for (int64_t i = 0; i < n; ++i)
    if (order.empty() || order.front() != i) order.push_back(i);
  std::string refusals;
  for (const int64_t i : order) {
    cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &configs[static_cast<size_t>(i)]);
    const cudnnStatus_t s = cudnnBackendFinalize(plan);
    if (s != CUDNN_STATUS_SUCCESS) {
      refusals += std::string(refusals.empty() ? "" : ", ") + "result " + std::to_string(i) + " " + cudnnGetErrorString(s);
      continue;
    }
    int64_t bytes = 0, got = 0;
    AMP_CUDNN_CHECK(
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &bytes));
    cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t index = -1;
    if (cudnnBackendGetAttribute(configs[static_cast<size_t>(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine) == CUDNN_STATUS_SUCCESS)
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &index);
    g->candidates_.push_back(Candidate{plan, static_cast<size_t>(bytes), i,
                                       "engine " + std::to_string(index) + " (heuristic result " + std::to_string(i) +
                                           " of " + std::to_string(offered) + ")"});
    if (!every) break;
  }
  if (g->candidates_.empty()) {
    *why = offered ? "no offered engine's plan finalized (" + refusals + ")" : "cuDNN's heuristic offered no engine";
    return nullptr;
  }
  g->refusals_ = refusals;
  return g;
}

std::string ConvolutionGraph::engine() const {
  return candidates_[selected_].engine + (refusals_.empty() ? "" : "; refused: " + refusals_);
}

void ConvolutionGraph::select(size_t k) {
  if (k >= candidates_.size()) throw Error("internal: no such convolution graph candidate");
  selected_ = k;
}

cudnnStatus_t ConvolutionGraph::execute(cudnnHandle_t handle, const ConvolutionGraphOperands& o,
                                        void* workspace) const {
  const bool forward = spec_.kind == ConvolutionGraphSpec::Kind::kForward;
  std::vector<int64_t> uids = {kX, kW, kY};
  std::vector<void*> pointers = {const_cast<void*>(o.x), forward ? const_cast<void*>(o.w) : o.dw,
                                 forward ? o.y : const_cast<void*>(o.dy)};
  if (spec_.prologue) {
    uids.insert(uids.end(), {kScale, kBias});
    pointers.insert(pointers.end(), {const_cast<float*>(o.scale), const_cast<float*>(o.bias)});
  }
  if (spec_.statistics && forward) {
    uids.insert(uids.end(), {kSum, kSquareSum});
    pointers.insert(pointers.end(), {o.sum, o.square_sum});
  }
  cudnnBackendDescriptor_t pack = nullptr;
  AMP_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  std::unique_ptr<void, cudnnStatus_t (*)(cudnnBackendDescriptor_t)> own(pack, cudnnBackendDestroyDescriptor);
  AMP_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                           static_cast<int64_t>(uids.size()), uids.data()));
  AMP_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                           static_cast<int64_t>(pointers.size()), pointers.data()));
  AMP_CUDNN_CHECK(
      cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  AMP_CUDNN_CHECK(cudnnBackendFinalize(pack));
  return cudnnBackendExecute(handle, candidates_[selected_].plan, pack);
}

}  // namespace amp::cuda
