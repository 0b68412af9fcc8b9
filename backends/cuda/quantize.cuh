// QuantizeLinear and DequantizeLinear (opset 10-17, per tensor or per axis) on the device, as the
// CPU kernels compute them (backends/cpu/quantize.cc), so a QDQ model (ONNX Runtime's quantizer's
// output: each weight and activation through a Quantize -> Dequantize pair) plans on the GPU:
//   QuantizeLinear:   y = saturate(round_half_to_even(x / scale) + zero_point) as uint8 or int8
//                     (NaN gives 0, as ONNX Runtime's saturating cast)
//   DequantizeLinear: y = (x - zero_point) * scale in the scale's type; x uint8, int8 or int32,
//                     the difference taken in int64
// in fp32 for float, float16 and bfloat16 data and scales (one division or product, rounded once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

// Element i of x reads scale and zero point [i / inner % extent]; extent 1: per tensor.
struct QuantShape {
  int64_t numel = 0, inner = 1, extent = 1;
};

// InputError when the scale is neither one element nor a vector of x's extent along `axis`.
QuantShape quant_shape(const std::vector<int64_t>& x, const std::vector<int64_t>& scale, int64_t axis);

// zero_point may be null (0). y_type is uint8 or int8.
void quantize_linear(DType x_type, DType scale_type, DType y_type, const QuantShape& s, const void* x,
                     const void* scale, const void* zero_point, void* y, int sm_count, cudaStream_t stream);
// x_type is uint8, int8 or int32 (the zero point's too); y has the scale's type.
void dequantize_linear(DType x_type, DType scale_type, const QuantShape& s, const void* x, const void* scale,
                       const void* zero_point, void* y, int sm_count, cudaStream_t stream);

}  // namespace amp::cuda
