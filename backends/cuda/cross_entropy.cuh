// ONNX SoftmaxCrossEntropyLoss and the project's SoftmaxCrossEntropyLossGrad, fused: scores seen as
// [n, classes, inner] (inner = product of the dims after the class axis), labels [n, inner].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "graph/dtype.h"

namespace amp::cuda {

enum class LossReduction { kNone, kSum, kMean };

struct CrossEntropyShape {
  int64_t n = 0, classes = 0, inner = 1;
  DType type = DType::kFloat;         // scores, weights, loss, dloss
  DType grad_type = DType::kUndefined;  // dscores: `type` when undefined; fp16/bf16 from float scores (an absorbed Cast)
  DType score_type = DType::kUndefined;  // scores' storage: `type` when undefined; fp16/bf16 under a float
                                         // loss where the op absorbed the widening Cast before it
  DType label_type = DType::kInt64;   // int32 or int64
  // Elements from one row of scores (and of dscores) to the next where inner == 1: classes when 0;
  // more for rows stored padded (TensorDesc::row_pitch). The backward writes zeros into dscores'
  // padding.
  int64_t score_pitch = 0, grad_pitch = 0;
  bool argmax_last = false;  // the forward's ArgMax (when asked for): select_last_index
  std::optional<int64_t> ignore_index;
  LossReduction reduction = LossReduction::kMean;
};

// Scratch the two kernels need: per-row losses and weights, in fp32.
size_t cross_entropy_workspace(const CrossEntropyShape& s);

// loss: [n, inner] for kNone, else a scalar; log_prob (may be null): like scores. weights may be null.
// argmax (may be null; inner == 1 only): each row's ArgMax over the classes, as arg_extremum
// computes it, found in the same pass over the scores.
void cross_entropy_forward(const CrossEntropyShape& s, const void* scores, const void* labels, const void* weights,
                           void* loss, void* log_prob, void* workspace, cudaStream_t stream, int64_t* argmax = nullptr);
// dscores = (softmax(scores) - onehot(label)) * weight[label] * dloss / (sum of weights, for kMean).
// dloss is a scalar, or [n, inner] for kNone.
void cross_entropy_backward(const CrossEntropyShape& s, const void* dloss, const void* scores, const void* labels,
                            const void* weights, void* dscores, void* workspace, cudaStream_t stream);

}  // namespace amp::cuda
