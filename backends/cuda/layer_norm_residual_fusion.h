// LayerNorm's backward with the residual stream's gradient added in its kernel, and its forward
// with the residual stream's Add.
//
// A transformer block's LayerNorm reads the residual stream x; in the backward pass the gradient
// reaching x is LayerNormalizationGrad's dX plus the gradient x gets by the residual path, an Add
// (and, in mixed precision, a Cast of that sum to 16 bits for the next product). Run apart, dX
// is written and read back once more: 24 of GPT-2-small's step, each [tokens, 768] fp32 (at 16 x
// 1024 tokens 2.4 GB of the step's traffic, 0.8 ms at its 3 TB/s; the Add+Cast kernels took 1.3
// ms on an H200, 2026-11-28). The unit computes dX, adds the residual gradient in fp32 as the
// Add does, and stores the sum and its 16-bit copy (layernorm.cu; the same bits as the graph's
// nodes). Where the residual is not dX's shape in fp32 the unit runs the Add (and Cast) as a
// generated kernel after the LayerNorm's, broadcasting as the graph does.
//
// Matched: an ai.onnx_amp LayerNormalizationGrad whose fp32 dX only an fp32 Add reads; with it the
// widening Cast of its dY that only it reads (as the schedule absorbs one for any op reading any
// float type) and one Cast of the Add's sum to float16 or bfloat16, or such a Cast of autodiff's
// SumToShape of the sum (which at GPT-2's shapes sums nothing: the gradient reaching the
// projection before the residual Add; where it does sum, the unit sums as it does).
#pragma once

#include <functional>
#include <vector>

#include "backends/cuda/unit_patterns.h"

namespace amp::cuda {

std::vector<UnitMatch> match_layer_norm_residual(const Graph& g, const std::function<bool(const Node*)>& excluded);

// The forward's counterpart: the residual stream's Add before a LayerNormalization, x = a + b (each
// past a widening Cast only the Add reads), runs in the LayerNorm's kernel, which stores the sum
// where other nodes read it (the next residual Add, the backward's LayerNorm gradient) and never
// reads it back: 24 [tokens, 768] fp32 reads of a GPT-2 step. Y is narrowed by the Cast that
// alone reads it, as the schedule's LayerNorm units do. Where a and b are not both the sum's
// shape (GPT's first block: the position table broadcast over the batch) or the rows are longer
// than the kernel keeps in registers (1024), the Add runs as a generated kernel before it.
std::vector<UnitMatch> match_residual_layer_norm(const Graph& g, const std::function<bool(const Node*)>& excluded);

}  // namespace amp::cuda
