// Scaled dot-product attention as PyTorch exports it becomes one ai.onnx_amp Attention
// (graph/amp_ops.h; ONNX's Attention of opset 23, which this project's opset 17 lacks):
//   S = MatMul(Q', K'^T)                      Q' = Q or Q scaled; K'^T a Transpose of K, maybe scaled
//   S = S * c | S / c                         any number of scalar constants, before the mask
//   L = Add(S, mask) | Where(hide, -inf, S)   at most one mask: float added, or bool hiding
//   Y = MatMul(Dropout?(Softmax(L, axis=-1)), V)
// with the scales multiplied into `scale` and a causal mask (a constant -inf bias or hiding bool
// that is triu(1) — generate_square_subsequent_mask, a Trilu of -inf, a registered triu buffer
// sliced from the top-left to the sequence length) turned into is_causal.
//
// Why: run as written, every layer stores the scores and probabilities, batch x heads x T x T
// (GPT-2 small at T = 1024, batch 8: 800 MB a layer in bf16), and the backward reads them again.
// The op's kernels never form T x T for the whole sequence: forward by blocks with an online
// softmax, the backward recomputing the probabilities from the rows' saved log-sum-exp.
//
// Matched only exactly: every intermediate read by the chain alone and no graph output; one
// floating type; Q, K and V of one known rank >= 2; the Softmax over the last axis; scale
// constants scalar (a negative scale only before the mask); the Where's fill exactly -inf and
// its condition of a rank no higher than the scores; a Dropout only where it is the identity
// (inference, or ratio 0), since the kernels draw no dropout mask. A sliced triu buffer is taken
// to be sliced to the scores' own length, as every export slices it (a slice of one row broadcast
// over longer sequences would not be causal).
#pragma once

#include "passes/pass.h"

namespace amp {

// What the pass would replace in m, left unchanged: for reports (amp-inspect) of models whose
// attention amp-train fuses.
struct AttentionChains {
  int64_t total = 0, causal = 0, masked = 0;
};
AttentionChains count_attention_chains(const Model& m);

class RecognizeAttentionPass : public Pass {
 public:
  std::string name() const override { return "recognize-attention"; }
  std::string summary() const override {
    return "replace MatMul, scale, mask, Softmax, MatMul attention by one ai.onnx_amp Attention";
  }
  bool run(Model& m) override;
};

}  // namespace amp
