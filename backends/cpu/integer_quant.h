// The integer arithmetic of ONNX's quantized ops (MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv): 8-bit operands widened to int32 minus their zero points, int32 products, and the
// requantization of an int32 accumulator to 8 bits. All exact, as ONNX defines them.
#pragma once

#include <cstdint>

#include "backends/cpu/kernel.h"

namespace amp::cpu {

// out[i] = x[i] - zero_point[k] (int32), x int8 or uint8. The zero point is absent (0), one element
// (per tensor) or one per index k = i / inner % extent (per row, column or output channel: the
// caller gives inner and extent; `what` names the operand in the error for any other size).
void widen_minus_zero_point(const View& x, const View* zero_point, int64_t inner, int64_t extent, int32_t* out,
                            const char* what);

// The float32 element k of a scale with one element (per tensor) or `extent` ones; InputError naming
// `what` for any other size.
struct Scales {
  Scales(const View& scale, int64_t extent, const char* what);
  float at(int64_t k) const { return per_tensor ? values[0] : values[k]; }
  const float* values;
  bool per_tensor;
};

// saturate(round_half_to_even(acc * multiplier) + zero_point) into `out`, an int8 or uint8 element
// (ONNX's reference: the int32 accumulator times the fp32 multiplier in double precision).
// a + b in int32 with two's-complement wrap-around, as ONNX Runtime's int32 accumulators behave
// past 2^31 (about 33,000 products of 8-bit terms); a plain int32 += would be undefined there.
inline int32_t wrapping_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

void requantize(int32_t acc, float multiplier, int32_t zero_point, DType out_type, void* out, int64_t i);

// The zero point's single element as int32 (0 when absent); InputError naming `what` unless it has one element.
int32_t scalar_zero_point(const View* zero_point, const char* what);

}  // namespace amp::cpu
