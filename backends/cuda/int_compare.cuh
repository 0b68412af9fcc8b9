// Equal, Less, LessOrEqual, Greater and GreaterOrEqual of int32 or int64 tensors, with ONNX's
// multidirectional broadcasting, into a bool tensor. The generated elementwise kernels hold values
// in fp32 registers (graph/ops/elementwise_program.cc), which are exact only up to 2^24: token ids
// 16777216 and 16777217 would compare equal. torch 1.13 exports nn.MultiheadAttention's key
// padding mask as Equal(tokens: int64, pad: int64), so these compare in the integer type itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

enum class IntComparison : int { kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual };

// The most dims a comparison may have after merging (int_compare_shape).
constexpr int kMaxCompareDims = 8;

// out[c] = a[sum c_d * a_strides_d] OP b[sum c_d * b_strides_d] for every coordinate c of dims
// (element strides; 0 along a dim the operand broadcasts).
struct IntCompareShape {
  IntComparison op = IntComparison::kEqual;
  DType type = DType::kInt64;  // of both operands: int32 or int64
  int rank = 0;
  int64_t dims[kMaxCompareDims] = {};
  int64_t a_strides[kMaxCompareDims] = {};
  int64_t b_strides[kMaxCompareDims] = {};
  int64_t numel = 0;
};

// The output's dims (ONNX broadcasting of a's and b's), dims of extent 1 dropped and dims both
// operands walk contiguously merged, so [B,T] == scalar is one dim of B*T. InputError when the
// dims do not broadcast, for a type other than int32 and int64, or beyond kMaxCompareDims dims.
IntCompareShape int_compare_shape(IntComparison op, DType type, const std::vector<int64_t>& a,
                                  const std::vector<int64_t>& b);
void int_compare(const IntCompareShape& s, const void* a, const void* b, bool* out, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
