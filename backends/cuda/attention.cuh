// Scaled dot-product attention (ai.onnx_amp Attention and AttentionGrad) on hand-written kernels:
// the fallback unit, for fp32 and for any shape, one thread per query row (per key row for dK and
// dV) looping over the other side with an online softmax, nothing T x T stored. fp32 math, the
// probabilities and dS rounded to the 16-bit type before they multiply (as the CPU kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/dtype.h"

namespace amp::cuda {

// Q [batch, Tq, d], K [batch, Tk, d], V [batch, Tk, dv] (batch the product of the leading dims);
// the mask's element of (batch b, query i, key j) at offset(b) + i * mask_row + j * mask_col,
// offset(b) = sum over the leading dims of b's index there times mask_lead_stride.
struct AttentionShape {
  static constexpr int kMaxLead = 6;
  static constexpr int kMaxHead = 128;  // d and dv: a thread's row lives in registers
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  int lead = 0;
  int64_t lead_dims[kMaxLead] = {};
  int64_t mask_lead_stride[kMaxLead] = {};
  int64_t mask_row = 0, mask_col = 0;
  float scale = 1;
  int causal = 0;
  DType mask_type = DType::kUndefined;  // kUndefined: no mask; kBool: true where a key takes part
};

// Y and, when lse is not null, each row's log-sum-exp (fp32). t: the type of Q, K, V and Y.
void attention_forward(DType t, const void* q, const void* k, const void* v, const void* mask, void* y, float* lse,
                       const AttentionShape& s, cudaStream_t stream);

// Workspace of attention_backward: one float per query row.
size_t attention_backward_workspace(const AttentionShape& s);
// dQ, dK, dV (each skipped when null) from dY, the forward's inputs, Y and LSE.
void attention_backward(DType t, const void* dy, const void* q, const void* k, const void* v, const void* y,
                        const float* lse, const void* mask, void* dq, void* dk, void* dv, const AttentionShape& s,
                        void* workspace, cudaStream_t stream);

// bias [outer, rows, cols] from a mask [outer, mask_rows ? rows : 1, mask_cols ? cols : 1] (both
// packed): a bool mask's element as 0 (attend) or the lowest finite value of t (hidden), a float
// mask's as its value in t, repeated over the dims the mask is broadcast over: the additive form,
// in full over queries and keys, that cuDNN's fused attention takes a mask in.
void attention_mask_bias(DType mask_type, const void* mask, DType t, void* bias, int64_t outer, int64_t rows,
                         int64_t cols, bool mask_rows, bool mask_cols, cudaStream_t stream);

}  // namespace amp::cuda
