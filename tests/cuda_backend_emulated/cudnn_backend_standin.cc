// A host stand-in of cuDNN 9's backend (graph) API (cudnn_graph.h), the descriptor layer that both
// of our callers use: backends/cuda/cudnn_convolution_graph.cc (convolution fusions with batch
// norm) and backends/cuda/cudnn_attention.cc (fused flash attention). Written from cuDNN's
// backend documentation ("Backend Descriptor Types"):
//
//  - descriptors hold typed attributes (cudnnBackendSetAttribute copies count elements of the
//    attribute type's size); a set on a finalized descriptor, or without elements, is
//    CUDNN_STATUS_BAD_PARAM, and so is a get of an attribute not set or of another type;
//  - cudnnBackendFinalize checks what each descriptor's documentation requires: a tensor's data
//    type, dims and strides of one rank, unique id and alignment; a convolution's compute type,
//    mode, pads, strides, dilations and spatial dims; a pointwise mode and math precision; a
//    pointwise operation's X and Y, B for binary modes, T for BINARY_SELECT, operands that
//    broadcast to Y (dims equal or 1); a matmul's A [.., M, K], B [.., K, N], C [.., M, N]; a
//    reduction's Y of X's rank with each dim X's or 1; a reshape's X and Y of one element count;
//    the convolution operations' and GenStats' operands; an operation graph's handle and
//    operations, each finalized; a heuristic's mode and finalized graph; a variant pack's ids and
//    pointers of one count; an execution plan's handle and an engine configuration the heuristics
//    filled;
//  - two engines answer the heuristics. A graph with a convolution goes to the convolution fusion
//    engine (cudnn_convolution_fusion_engine.cc), which offers one configuration for the patterns
//    cuDNN fuses with batch norm and none for anything else — or, with
//    AMP_STANDIN_CUDNN_GRAPH_ENGINES=MS,MS,..., one per entry, engine global index 100, 101, ...,
//    each computing the same and taking at least MS milliseconds of host time a run (so that a
//    caller timing them sees which is fastest; an entry "refuse" is a configuration whose plan
//    does not finalize); any other graph goes to the fused
//    attention engine (cudnn_attention_engine.cc), which always offers one configuration (engine
//    global index 0) and refuses at the plan's finalisation what its support surface excludes;
//  - cudnnBackendExecute runs the plan's graph through its engine on the handle's stream.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda_backend_emulated/cudnn_backend_descriptors.h"
#include "tests/cuda_backend_emulated/standin.h"

namespace amp_standin::cudnn_backend {

namespace {

// AMP_STANDIN_CUDNN_GRAPH_ENGINES: the milliseconds a run of each offered convolution engine
// takes, a negative entry for one that refuses its plan; one engine taking no time without it.
std::vector<double> convolution_engines() {
  std::vector<double> ms;
  const char* v = std::getenv("AMP_STANDIN_CUDNN_GRAPH_ENGINES");
  std::string list = v ? v : "";
  for (size_t at = 0; at < list.size();) {
    const size_t next = list.find(',', at);
    const std::string entry = list.substr(at, next == std::string::npos ? std::string::npos : next - at);
    ms.push_back(entry == "refuse" ? -1.0 : std::stod(entry));
    at = next == std::string::npos ? list.size() : next + 1;
  }
  if (ms.empty()) ms.push_back(0.0);
  return ms;
}

std::string last_error;

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

// Row-major dims of `x` that broadcast to `y` (equal or 1, one rank).
bool broadcasts(const Tensor& x, const Tensor& y) {
  if (x.dims.size() != y.dims.size()) return false;
  for (size_t a = 0; a < x.dims.size(); ++a)
    if (x.dims[a] != y.dims[a] && x.dims[a] != 1) return false;
  return true;
}

bool binary(cudnnPointwiseMode_t m) {
  switch (m) {
    case CUDNN_POINTWISE_ADD: case CUDNN_POINTWISE_SUB: case CUDNN_POINTWISE_MUL: case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_CMP_GE: case CUDNN_POINTWISE_CMP_LT: case CUDNN_POINTWISE_LOGICAL_AND:
    case CUDNN_POINTWISE_BINARY_SELECT: return true;
    default: return false;
  }
}

// What cudnnBackendFinalize checks of each descriptor type (documented requirements).
cudnnStatus_t check_finalize(Descriptor& d) {
  auto need = [&](std::initializer_list<int> attrs) {
    for (int a : attrs)
      if (!has(d, a)) return fail(CUDNN_STATUS_BAD_PARAM, "attribute " + std::to_string(a) + " not set");
    return CUDNN_STATUS_SUCCESS;
  };
  auto finalized = [&](std::initializer_list<int> attrs) {
    for (int a : attrs)
      if (!desc(d, a) || !desc(d, a)->finalized) return false;
    return true;
  };
  auto tensor = [&](int a) { return tensor_of(desc(d, a)); };
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
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
      return need({CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_ATTR_CONVOLUTION_DILATIONS,
                   CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
                   CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS});
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return need({CUDNN_ATTR_POINTWISE_MODE, CUDNN_ATTR_POINTWISE_MATH_PREC});
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return need({CUDNN_ATTR_MATMUL_COMP_TYPE});
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return need({CUDNN_ATTR_REDUCTION_OPERATOR});
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
      if (!finalized({CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                      CUDNN_ATTR_OPERATION_POINTWISE_YDESC}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a pointwise operation without a finalized mode, X or Y");
      const auto m = value<cudnnPointwiseMode_t>(*desc(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR),
                                                 CUDNN_ATTR_POINTWISE_MODE);
      std::vector<Tensor> in;
      for (int a : {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                    CUDNN_ATTR_OPERATION_POINTWISE_TDESC})
        if (desc(d, a)) in.push_back(tensor(a));
      const size_t want = m == CUDNN_POINTWISE_BINARY_SELECT ? 3 : binary(m) ? 2 : 1;
      if (in.size() != want)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "pointwise mode " + std::to_string(m) + " with " + std::to_string(in.size()) + " operands");
      const Tensor y = tensor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
      for (const Tensor& t : in)
        if (!broadcasts(t, y)) return fail(CUDNN_STATUS_BAD_PARAM, "a pointwise operand does not broadcast to Y");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
      if (!finalized({CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a convolution forward without a finalized descriptor, X, W or Y");
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
      if (!finalized({CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a convolution backward filter without a finalized descriptor, X, dY or dW");
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR:
      if (cudnnStatus_t s = need({CUDNN_ATTR_OPERATION_GENSTATS_MODE})) return s;
      if (!finalized({CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC,
                      CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a GenStats without finalized X, sum or sum of squares");
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
      if (!finalized({CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                      CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_ATTR_OPERATION_MATMUL_DESC}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a matmul without finalized A, B, C or descriptor");
      const Tensor a = tensor(CUDNN_ATTR_OPERATION_MATMUL_ADESC), b = tensor(CUDNN_ATTR_OPERATION_MATMUL_BDESC),
                   c = tensor(CUDNN_ATTR_OPERATION_MATMUL_CDESC);
      const size_t r = c.dims.size();
      if (a.dims.size() != r || b.dims.size() != r || r < 2 || a.dims[r - 1] != b.dims[r - 2] ||
          a.dims[r - 2] != c.dims[r - 2] || b.dims[r - 1] != c.dims[r - 1])
        return fail(CUDNN_STATUS_BAD_PARAM, "a matmul's A [.., M, K], B [.., K, N], C [.., M, N] do not fit");
      for (size_t i = 0; i + 2 < r; ++i)
        if ((a.dims[i] != c.dims[i] && a.dims[i] != 1) || (b.dims[i] != c.dims[i] && b.dims[i] != 1))
          return fail(CUDNN_STATUS_BAD_PARAM, "a matmul's batch dims do not broadcast");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
      if (!finalized({CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                      CUDNN_ATTR_OPERATION_REDUCTION_DESC}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a reduction without finalized X, Y or descriptor");
      if (!broadcasts(tensor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), tensor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC)))
        return fail(CUDNN_STATUS_BAD_PARAM, "a reduction's Y is not X's dims or 1");
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
      if (!finalized({CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_ATTR_OPERATION_RESHAPE_YDESC}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a reshape without finalized X or Y");
      if (tensor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC).numel() != tensor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC).numel())
        return fail(CUDNN_STATUS_BAD_PARAM, "a reshape changes the element count");
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_ATTR_OPERATIONGRAPH_OPS})) return s;
      for (cudnnBackendDescriptor_t o : values<cudnnBackendDescriptor_t>(d, CUDNN_ATTR_OPERATIONGRAPH_OPS))
        if (!o || !as(o)->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "an operation of the graph is not finalized");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      if (!finalized({CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH}))
        return fail(CUDNN_STATUS_BAD_PARAM, "a heuristic without a finalized graph");
      return need({CUDNN_ATTR_ENGINEHEUR_MODE});
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS}))
        return s;
      if (d.attrs[CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS].count != d.attrs[CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS].count)
        return fail(CUDNN_STATUS_BAD_PARAM, "a variant pack's ids and pointers differ in count");
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      if (cudnnStatus_t s = need({CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG})) return s;
      const Descriptor* config = desc(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
      if (!config || !config->finalized || !desc(*config, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH))
        return fail(CUDNN_STATUS_BAD_PARAM, "an execution plan without an engine configuration of the heuristics");
      const Descriptor& graph = *desc(*config, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      if (!is_convolution_graph(graph)) {
        if (cudnnStatus_t s = attention_plan_check(graph)) return s;
        d.workspace = attention_workspace(graph);
      } else {  // the convolution fusion engine took the graph at the heuristics and computes without a workspace
        const std::vector<double> engines = convolution_engines();
        const size_t k = static_cast<size_t>(config->engine > 0 ? config->engine - 100 : 0);
        if (k < engines.size() && engines[k] < 0)
          return fail(CUDNN_STATUS_NOT_SUPPORTED, "AMP_STANDIN_CUDNN_GRAPH_ENGINES: engine " +
                                                     std::to_string(config->engine) + " refuses its plan");
      }
      d.attrs[CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH] = config->attrs.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      d.engine = config->engine;
      return CUDNN_STATUS_SUCCESS;
    }
    default: return CUDNN_STATUS_SUCCESS;
  }
}

}  // namespace

cudnnStatus_t fail(cudnnStatus_t s, const std::string& why) {
  last_error = why;
  return s;
}

Tensor tensor_of(const Descriptor* d) {
  Tensor t;
  if (!d) return t;
  t.uid = value<int64_t>(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID);
  t.type = value<cudnnDataType_t>(*d, CUDNN_ATTR_TENSOR_DATA_TYPE);
  t.dims = values<int64_t>(*d, CUDNN_ATTR_TENSOR_DIMENSIONS);
  t.strides = values<int64_t>(*d, CUDNN_ATTR_TENSOR_STRIDES);
  t.is_virtual = value<bool>(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL);
  t.by_value = value<bool>(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE);
  return t;
}

std::vector<const Descriptor*> operations(const Descriptor& graph) {
  std::vector<const Descriptor*> ops;
  for (cudnnBackendDescriptor_t o : values<cudnnBackendDescriptor_t>(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS))
    ops.push_back(as(o));
  return ops;
}

}  // namespace amp_standin::cudnn_backend

using namespace amp_standin::cudnn_backend;

extern "C" {

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (max_size == 0) return;
  std::strncpy(message, last_error.c_str(), max_size - 1);
  message[max_size - 1] = '\0';
  last_error.clear();
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor) {
  if (!descriptor) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendCreateDescriptor without a place for it");
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
  if (cudnnStatus_t s = check_finalize(*d)) return s;
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t* count,
                                       void* elements) {
  const Descriptor* d = as(descriptor);
  if (!d || !d->finalized) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendGetAttribute of a descriptor not finalized");
  // The heuristic's results: one engine configuration (into the caller's ENGINECFG descriptors)
  // when an engine takes the graph, else none.
  if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    const Descriptor* graph = desc(*d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || !graph || !count)
      return fail(CUDNN_STATUS_BAD_PARAM, "the heuristic's results asked for without a count or as another type");
    const bool convolution = is_convolution_graph(*graph);
    const int64_t engines = convolution && std::getenv("AMP_STANDIN_CUDNN_GRAPH_ENGINES")
                                ? static_cast<int64_t>(convolution_engines().size())
                                : 1;
    *count = convolution && !convolution_fusion_takes(*graph) ? 0 : engines;
    for (int64_t k = 0; k < std::min(*count, requested); ++k) {
      Descriptor* config = elements ? as(static_cast<cudnnBackendDescriptor_t*>(elements)[k]) : nullptr;
      if (!config || config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || config->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "heuristic results into a descriptor that is no engine configuration");
      config->attrs[CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH] = d->attrs.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      config->engine = engines > 1 ? 100 + k : 0;
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && name == CUDNN_ATTR_ENGINECFG_ENGINE) {
    Descriptor* engine = requested >= 1 && elements ? as(*static_cast<cudnnBackendDescriptor_t*>(elements)) : nullptr;
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || !engine || engine->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR)
      return fail(CUDNN_STATUS_BAD_PARAM, "an engine configuration's engine asked for into no engine descriptor");
    const int64_t index = d->engine;
    Attribute a{CUDNN_TYPE_INT64, 1, std::vector<unsigned char>(sizeof index)};
    std::memcpy(a.bytes.data(), &index, sizeof index);
    engine->attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = std::move(a);
    engine->finalized = true;
    if (count) *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
    if (type != CUDNN_TYPE_INT64 || !elements)
      return fail(CUDNN_STATUS_BAD_PARAM, "a plan's workspace size asked for as another type");
    *static_cast<int64_t*>(elements) = d->workspace;
    if (count) *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  auto it = d->attrs.find(name);
  if (it == d->attrs.end() || it->second.type != type) return fail(CUDNN_STATUS_BAD_PARAM, "no such attribute");
  const int64_t n = std::min(requested, it->second.count);
  if (n > 0 && elements) std::memcpy(elements, it->second.bytes.data(), static_cast<size_t>(n) * element_size(type));
  if (count) *count = it->second.count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  const Descriptor* plan = as(executionPlan);
  const Descriptor* pack = as(variantPack);
  if (!plan || !plan->finalized || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !pack ||
      !pack->finalized || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute without a finalized plan and variant pack");
  const Descriptor& graph = *desc(*plan, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
  if (!is_convolution_graph(graph)) return attention_execute(handle, graph, plan->workspace, *pack);
  const std::vector<int64_t> uids = values<int64_t>(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const std::vector<void*> pointers = values<void*>(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  std::map<int64_t, void*> where;
  for (size_t i = 0; i < uids.size(); ++i) where[uids[i]] = pointers[i];
  // The graph's descriptors stay alive while the plan does (the caller keeps them).
  const Descriptor* g = &graph;
  const std::vector<double> engines = convolution_engines();
  const size_t k = static_cast<size_t>(plan->engine > 0 ? plan->engine - 100 : 0);
  const double ms = k < engines.size() ? engines[k] : 0.0;
  const cudaError_t e = amp_standin::enqueue(amp_standin::cudnn_stream(handle), [g, where, ms] {
    if (!convolution_fusion_run(*g, where)) amp_standin::set_last_error(cudaErrorLaunchFailure);
    if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
