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
#include <memory>
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
  // finalizes; null when none does (`why` then says what refused it), for the caller to run the
  // same work unfused. Errors of this code (BAD_PARAM) throw.
  static std::unique_ptr<ConvolutionGraph> build(const ConvolutionGraphSpec& spec, cudnnHandle_t handle,
                                                 std::string* why);
  ~ConvolutionGraph();
  ConvolutionGraph(const ConvolutionGraph&) = delete;
  ConvolutionGraph& operator=(const ConvolutionGraph&) = delete;

  size_t workspace_bytes() const { return workspace_; }
  // "engine 21 (heuristic result 0 of 8)": cuDNN's global index of the engine that runs the graph,
  // and where the heuristic ranked it (for the device report).
  const std::string& engine() const { return engine_; }
  // Enqueues the plan on the handle's stream.
  cudnnStatus_t execute(cudnnHandle_t handle, const ConvolutionGraphOperands& operands, void* workspace) const;

 private:
  ConvolutionGraph() = default;
  ConvolutionGraphSpec spec_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor, destroyed in reverse
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_ = 0;
  std::string engine_;
};

}  // namespace amp::cuda
