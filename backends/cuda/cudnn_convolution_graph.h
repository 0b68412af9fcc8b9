// A convolution with a BatchNorm's work on either side of it as one cuDNN operation graph (the
// backend API of cudnn_graph.h), the patterns of cuDNN's convolution fusions with batch norm:
//   forward          [X' = relu(X * scale + bias), per channel ->] Y = conv(X', W)
//                    [-> sum and sum of squares of Y per channel (GenStats)]
//   backward filter  X' = relu(X * scale + bias) -> dW = conv_wgrad(X', dY)
// The per-channel scale and bias are fp32 [1, C, 1, ...]; the statistics fp32 [1, K, 1, ...];
// the ReLU's result, virtual, is rounded to X's type before the Tensor Cores read it, as a stored
// activation would be. X, W, Y, dY, dW are one 16-bit type, packed: NCHW with KCRS filters, or
// channels-last, NHWC with KRSC filters (cuDNN's CUDNN_TENSOR_NHWC filter format), the layout of
// cuDNN's own ConvBNfprop and ConvBNwgrad samples and the one its fusion engines are built for.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

struct ConvolutionGraphSpec {
  enum class Kind { kForward, kBackwardFilter };
  Kind kind = Kind::kForward;
  DType type = DType::kUndefined;
  std::vector<int64_t> x, w, y;  // X, W (dW) and Y (dY) dims, [N, C, spatial...] / [K, C, r...]
  std::vector<int64_t> pads, strides, dilations;
  bool prologue = false;    // X' = relu(X * scale + bias)
  bool statistics = false;  // forward: the per-channel sums of Y
  bool channels_last = false;  // X, Y, dY stored NHWC and W, dW KRSC (dims still in ONNX's order)
};

// The device pointers of one run, by role (null for a role the graph does not have).
struct ConvolutionGraphOperands {
  const void *x = nullptr, *w = nullptr, *dy = nullptr;
  const float *scale = nullptr, *bias = nullptr;
  void *y = nullptr, *dw = nullptr;
  float *sum = nullptr, *square_sum = nullptr;
};

class ConvolutionGraph {
 public:
  // The graph for spec with the plan of the first engine cuDNN's heuristic offers for it that
  // finalizes (`prefer`: the heuristic's result to try first, a choice remembered from an earlier
  // run); with `every`, the plans of all the offered engines that finalize, as candidates for the
  // caller to time (select), the first of them selected. Null when none finalizes (`why` then says
  // what refused it), for the caller to run the same work unfused. Errors of this code (BAD_PARAM)
  // throw.
  static std::unique_ptr<ConvolutionGraph> build(const ConvolutionGraphSpec& spec, cudnnHandle_t handle,
                                                 std::string* why, std::optional<int64_t> prefer = std::nullopt,
                                                 bool every = false);
  ~ConvolutionGraph();
  ConvolutionGraph(const ConvolutionGraph&) = delete;
  ConvolutionGraph& operator=(const ConvolutionGraph&) = delete;

  const ConvolutionGraphSpec& spec() const { return spec_; }
  size_t candidates() const { return candidates_.size(); }
  void select(size_t k);  // the candidate execute runs
  size_t selected() const { return selected_; }
  // The heuristic's rank of the selected candidate (what build's `prefer` takes).
  int64_t rank() const { return candidates_[selected_].rank; }
  size_t workspace_bytes() const { return candidates_[selected_].workspace; }
  size_t largest_workspace_bytes() const {
    size_t most = 0;
    for (const Candidate& c : candidates_) most = std::max(most, c.workspace);
    return most;
  }
  // "engine 21 (heuristic result 0 of 8)": cuDNN's global index of the engine of the selected
  // candidate, and where the heuristic ranked it; then the offers refused before it (for the
  // device report).
  std::string engine() const;
  const std::string& candidate_engine(size_t k) const { return candidates_.at(k).engine; }
  // Enqueues the selected plan on the handle's stream.
  cudnnStatus_t execute(cudnnHandle_t handle, const ConvolutionGraphOperands& operands, void* workspace) const;

 private:
  struct Candidate {
    cudnnBackendDescriptor_t plan = nullptr;
    size_t workspace = 0;
    int64_t rank = 0;
    std::string engine;
  };
  ConvolutionGraph() = default;
  ConvolutionGraphSpec spec_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor, destroyed in reverse
  std::vector<Candidate> candidates_;
  size_t selected_ = 0;
  std::string refusals_;
};

}  // namespace amp::cuda
