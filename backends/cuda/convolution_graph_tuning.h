// Which of the engines cuDNN offers for a convolution graph runs it (AMP_CUDNN_GRAPH_TUNE=1): by
// default the heuristic's first that finalizes (cudnn_convolution_graph.h), as PyTorch does
// without torch.backends.cudnn.benchmark; tuned, every offered engine that finalizes is timed on
// the graph's shapes and the fastest runs, as cudnn-frontend's autotuning and PyTorch's benchmark
// mode do. On an H100 (2026-11-27, cuDNN 9.19) the heuristic's first for ResNet-50's fused
// forward convolutions were runtime-fusion kernels built for sm80, at about 100 TFLOP/s (8.3 ms
// of a 65 ms bf16 step). The choice is remembered per shape and device (DeviceContext's algorithm
// store, "graph ..." keys): a later run finalizes only the engine chosen. Opt-in until a device
// shows what it gains against what its cold start costs (each runtime-fusion engine compiles its
// kernels when its plan finalizes).
#pragma once

#include <string>

#include "backends/cuda/cudnn_convolution_graph.h"
#include "backends/cuda/device_context.h"

namespace amp::cuda {

bool tune_convolution_graphs();

// Times each candidate of g (one run to load its kernels, then two between events) on zero-filled
// scratch operands of g's spec, selects the fastest, and returns what it measured for the device
// report: "engine 21 (heuristic result 0 of 8) 0.294 ms, ...", a candidate cuDNN refused to run
// with its status instead. g keeps its selection when every candidate was refused.
std::string select_fastest_candidate(ConvolutionGraph& g, DeviceContext& ctx);

}  // namespace amp::cuda
