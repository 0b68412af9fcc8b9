// What the host stand-in of cuDNN's backend (graph) API shares between its descriptor layer
// (cudnn_backend_standin.cc: cudnnBackend* entry points, finalisation checks, heuristics) and its
// two engines: the convolution fusions with batch norm (cudnn_convolution_fusion_engine.cc) and
// the fused flash attention (cudnn_attention_engine.cc).
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace amp_standin::cudnn_backend {

struct Attribute {
  cudnnBackendAttributeType_t type{};
  int64_t count = 0;
  std::vector<unsigned char> bytes;  // count elements of `type`
};

struct Descriptor {
  cudnnBackendDescriptorType_t type{};
  bool finalized = false;
  std::map<int, Attribute> attrs;
  int64_t workspace = 0;  // an execution plan's
  int64_t engine = 0;     // an engine configuration's (and its plan's) engine, as the heuristics numbered it
};

inline Descriptor* as(cudnnBackendDescriptor_t d) { return static_cast<Descriptor*>(d); }

// Records `why` for cudnnGetLastErrorString and returns `s`.
cudnnStatus_t fail(cudnnStatus_t s, const std::string& why);

inline bool has(const Descriptor& d, int a) { return d.attrs.count(a) != 0; }

template <class T>
std::vector<T> values(const Descriptor& d, int a) {
  std::vector<T> out;
  auto it = d.attrs.find(a);
  if (it == d.attrs.end()) return out;
  out.resize(static_cast<size_t>(it->second.count));
  std::memcpy(out.data(), it->second.bytes.data(), std::min(it->second.bytes.size(), out.size() * sizeof(T)));
  return out;
}

template <class T>
T value(const Descriptor& d, int a, T otherwise = T{}) {
  auto it = d.attrs.find(a);
  if (it == d.attrs.end() || it->second.count == 0 || it->second.bytes.size() < sizeof(T)) return otherwise;
  T v;
  std::memcpy(&v, it->second.bytes.data(), sizeof v);
  return v;
}

// The descriptor an attribute links to, or null.
inline Descriptor* desc(const Descriptor& d, int a) { return as(value<cudnnBackendDescriptor_t>(d, a, nullptr)); }

// A tensor descriptor's facts.
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

Tensor tensor_of(const Descriptor* d);
size_t type_size(cudnnDataType_t t);
inline bool is_16bit(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }
float load(const void* p, cudnnDataType_t t, int64_t i);
void store(void* p, cudnnDataType_t t, int64_t i, float v);  // rounded to nearest even
float rounded(float v, cudnnDataType_t t);

// The operations of an operation graph, in the order they were set.
std::vector<const Descriptor*> operations(const Descriptor& graph);

// --- the convolution fusion engine (cudnn_convolution_fusion_engine.cc) ---------------------------
// Whether a graph holds a convolution (and so is this engine's to take or refuse).
bool is_convolution_graph(const Descriptor& graph);
// Whether the engine takes the graph (AMP_STANDIN_CUDNN_REFUSE_GRAPH=1: never).
bool convolution_fusion_takes(const Descriptor& graph);
// Runs the graph on the host with the variant pack's pointers; false where one is missing.
bool convolution_fusion_run(const Descriptor& graph, const std::map<int64_t, void*>& pointers);

// --- the fused attention engine (cudnn_attention_engine.cc) ----------------------------------------
// The documented support surface a plan finalises for (a refusal's status, its words in fail()).
cudnnStatus_t attention_plan_check(const Descriptor& graph);
int64_t attention_workspace(const Descriptor& graph);
// Checks the variant pack against the plan and enqueues the graph's evaluation on the handle's stream.
cudnnStatus_t attention_execute(cudnnHandle_t handle, const Descriptor& graph, int64_t workspace,
                                const Descriptor& pack);

}  // namespace amp_standin::cudnn_backend
