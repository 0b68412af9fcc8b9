// The products' algorithms timed on the device (AMP_CUBLASLT_TUNE=1), as cuDNN's Find times the
// convolutions'.
//
// cuBLASLt's heuristic ranks the algorithms it offers for a product by an estimate; the plan asks
// for kHeuristicResults of them and runs the first. On the H200 (2026-11-28, 07:02) GPT-2-small's
// products ran at about 350 TFLOP/s of the chip's 989 (27.8 of a 45.2 ms step at 16 x 1024
// tokens): whether another of the offered algorithms is faster for these shapes is for a device
// to say. With AMP_CUBLASLT_TUNE=1 a plan runs each offered algorithm of each product once to load
// it and three times between two events, on scratch operands of the product's sizes (zeros:
// Tensor Cores take no longer on other values), and starts with the fastest; the choice is kept
// per description, device and cuBLASLt version beside the convolution algorithms
// (algorithm_store.h), so a later run of the same shapes measures nothing. The scratch operands
// are allocated while the plan is prepared, so a run that tunes holds the largest product's for a
// moment (GPT-2's head at 16 x 1024 tokens: 1.7 GB of scores) and its peak device memory shows
// it; a run that finds its choices remembered allocates nothing. Off by default until a device's
// measurement says the start-up it costs buys a faster step.
#pragma once

#include "backends/cuda/device_context.h"
#include "backends/cuda/gemm.h"

namespace amp::cuda {

// Whether AMP_CUBLASLT_TUNE=1 asks for it.
bool gemm_tuning();

// Times plan's algorithms and has it start with the fastest (or with the one remembered for its
// description); records `gemm_tuned` in the device report. Nothing when tuning is off or the plan
// has one algorithm.
void tune_gemm(GemmPlan& plan, DeviceContext& ctx);

}  // namespace amp::cuda
