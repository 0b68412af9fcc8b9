// cuDNN's fused flash attention through cuDNN 9's graph (backend) API, forward and backward, for
// fp16 and bf16: the operation graph cuDNN's SDPA engines recognise (the one NVIDIA's
// cudnn-frontend builds for its sdpa and sdpa_backward nodes, written here against the backend
// descriptors of cudnn_graph.h directly: about 40 descriptors a direction do not justify vendoring
// its 52k lines of headers, as of 1.10), finalised into one execution plan per shape, executed with a
// variant pack per launch. A shape cuDNN refuses (no engine, or no plan that finalises) is not an
// error: build() answers why, and attention_ops.cc runs the fallback kernels and records the
// refusal in the device report.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

// Q, K, V, Y and dY as [b, h, s, d] row-major (the IR's [..., T, d] with its leading dims as b
// times h); a bias, when present, [b or 1, h or 1, s_q or 1, s_kv or 1] row-major, of `type`.
struct CudnnAttentionShape {
  DType type = DType::kUndefined;  // kFloat16 or kBFloat16
  int64_t b = 1, h = 1, sq = 0, skv = 0, d = 0, dv = 0;
  float scale = 1;
  bool causal = false;             // top-left: key j hidden from query i when j > i
  std::vector<int64_t> bias_dims;  // empty: no bias
};

// The graph's tensors, by the unique ids the variant pack names them with.
enum class AttentionTensor : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kBias, kMaskFill, kOne, kdO, kdQ, kdK, kdV, kdQAccumulator, kSoftmaxSum
};

class CudnnAttention {
 public:
  // The finalised plan of the forward (Q, K, V, [bias] -> O, Stats) or of the backward (dO, Q, K,
  // V, O, Stats, [bias] -> dQ, dK, dV); null with *refusal saying which call answered what.
  static std::unique_ptr<CudnnAttention> build(const CudnnAttentionShape& s, bool backward, cudnnHandle_t handle,
                                               std::string* refusal);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Device scratch execute() needs: cuDNN's workspace and, for the backward, the fp32 dQ
  // accumulator and the rows' sum(dO * O) the graph keeps outside cuDNN's workspace.
  size_t workspace_bytes() const { return workspace_ + extra_bytes_; }
  const std::string& engine() const { return engine_; }

  struct Descriptors;  // every descriptor of the graph and plan, destroyed with the plan

  // Enqueues the plan on the handle's stream; `tensors` pairs each non-virtual, non-scalar tensor
  // of the graph with its device address (the scalars are the plan's own).
  void execute(cudnnHandle_t handle, cudaStream_t stream, const std::vector<std::pair<AttentionTensor, void*>>& tensors,
               void* workspace) const;

 private:
  CudnnAttention() = default;
  std::unique_ptr<Descriptors> held_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_ = 0, extra_bytes_ = 0;
  size_t accumulator_bytes_ = 0;  // the dQ accumulator, zeroed before each backward
  float scale_ = 1, one_ = 1, mask_fill_ = 0;
  std::vector<AttentionTensor> scalars_;  // the by-value tensors the graph has
  std::string engine_;
};

}  // namespace amp::cuda
