// Padded rows for values whose rows cuBLASLt's fast kernels cannot take, decided per plan without
// a device.
//
// A row-major matrix whose rows are not a multiple of 16 bytes long (GPT-2's [tokens, 50257]
// scores in bf16) leaves cuBLASLt only its slow kernels; gemm_padding.h runs such products on
// padded copies, and for the language-model head those copies were the expense: each of its three
// products staged the 1.65 GB of scores or of their gradient (at 16 x 1024 tokens), 4.6 of the
// head's 10.4 ms on an H200 (2026-11-28). So where every unit that writes or reads such a value
// takes it padded, the plan stores it so (TensorDesc::row_pitch: each row at a multiple of 16
// bytes from the last, zeros between), and nothing copies it: the head's product writes its
// scores padded (its padded weight rows and bias are zero, so the padding is), the loss, its
// gradient and the accuracy's ArgMax read their rows where they start, the gradient writes its
// padding as zeros, and the two backward products read it where it is.
//
// - A candidate is a float value of two dims or more whose last dim is not 16 bytes of its type,
//   written by a device unit, and neither fed, fetched, state, a state update, known on the host,
//   channels-last nor packed; its views (the same bytes under other dims) go with it and must end
//   in the same last dim.
// - It is stored padded when its writer and every unit reading it or one of its views take it so
//   (CudaOp::takes_row_pitch), asked with the pitch set: the products only where their padded
//   product (gemm_padding.h) widens exactly those rows, the loss and its gradient for [N, C]
//   scores, ArgMax over the last axis.
// - Everything that sizes a value's buffer or counts its bytes reads TensorDesc::nbytes(), which
//   counts the padding.
#pragma once

#include <vector>

#include "backends/cuda/schedule.h"

namespace amp::cuda {

// The pitch, in elements, rows of `cols` elements of type t get: the next multiple of 16 bytes.
int64_t padded_row_length(int64_t cols, DType t);

// Sets p.desc[v].row_pitch of the values stored with padded rows (and of their views). targets:
// the values fetched or written to state; fed: per value, the tensor fed.
void decide_row_pitch(const Schedule& s, ShapePlan& p, const std::vector<int>& targets,
                      const std::vector<const Tensor*>& fed);

// The values (roots, not views) a plan stores with padded rows, in value order.
std::vector<int> padded_row_values(const ShapePlan& p);

}  // namespace amp::cuda
