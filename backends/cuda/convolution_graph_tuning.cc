#include "backends/cuda/convolution_graph_tuning.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/env_flag.h"
#include "backends/cuda/stream_timer.h"
#include "graph/dtype.h"

namespace amp::cuda {

namespace {

size_t elements(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

// A zero-filled device buffer of `bytes` (at least 1, so every role has an address).
DeviceBuffer zeros(size_t bytes, cudaStream_t stream) {
  DeviceBuffer b(bytes ? bytes : 1);
  AMP_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.size(), stream));
  return b;
}

}  // namespace

bool tune_convolution_graphs() {
  return env_flag("AMP_CUDNN_GRAPH_TUNE");
}

std::string select_fastest_candidate(ConvolutionGraph& g, DeviceContext& ctx) {
  const ConvolutionGraphSpec& spec = g.spec();
  const size_t size = dtype_size(spec.type);
  cudaStream_t stream = ctx.stream();
  const DeviceBuffer x = zeros(elements(spec.x) * size, stream), w = zeros(elements(spec.w) * size, stream),
                     y = zeros(elements(spec.y) * size, stream);
  const DeviceBuffer scale = zeros(static_cast<size_t>(spec.x.at(1)) * sizeof(float), stream),
                     bias = zeros(static_cast<size_t>(spec.x.at(1)) * sizeof(float), stream),
                     sum = zeros(static_cast<size_t>(spec.y.at(1)) * sizeof(float), stream),
                     square = zeros(static_cast<size_t>(spec.y.at(1)) * sizeof(float), stream),
                     workspace = zeros(g.largest_workspace_bytes(), stream);
  ConvolutionGraphOperands o;
  o.x = x.data();
  if (spec.kind == ConvolutionGraphSpec::Kind::kForward) {
    o.w = w.data();
    o.y = y.data();
  } else {
    o.dy = y.data();
    o.dw = w.data();
  }
  o.scale = static_cast<const float*>(scale.data());
  o.bias = static_cast<const float*>(bias.data());
  o.sum = static_cast<float*>(sum.data());
  o.square_sum = static_cast<float*>(square.data());

  StreamTimer timer(stream);
  size_t best = g.selected();
  float best_ms = std::numeric_limits<float>::infinity();
  std::string measured;
  for (size_t k = 0; k < g.candidates(); ++k) {
    g.select(k);
    std::string result;
    cudnnStatus_t status = g.execute(ctx.cudnn(), o, workspace.data());
    float ms = 0.0f;
    if (status == CUDNN_STATUS_SUCCESS)
      ms = timer.time([&] {
             for (int run = 0; run < 2 && status == CUDNN_STATUS_SUCCESS; ++run)
               status = g.execute(ctx.cudnn(), o, workspace.data());
           }) /
           2.0f;
    if (status == CUDNN_STATUS_SUCCESS) {
      char text[32];
      std::snprintf(text, sizeof text, " %.6f ms", static_cast<double>(ms));
      result = text;
      if (ms < best_ms) {
        best_ms = ms;
        best = k;
      }
    } else {
      result = std::string(" refused when run: ") + cudnnGetErrorString(status);
    }
    measured += (measured.empty() ? "" : ", ") + g.candidate_engine(k) + result;
  }
  g.select(best);
  return measured;
}

}  // namespace amp::cuda
