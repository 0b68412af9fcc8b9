// How ScatterND and ScatterElements combine an update with what is there on the device, as the
// CPU's scatter_combine (backends/cpu/scatter_reduction.h): add and mul in the element's type,
// 16-bit floats in fp32 rounded once, max and min by comparison, bool as or / and; and the element
// types they take.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/float_types.cuh"
#include "graph/dtype.h"
#include "graph/error.h"

namespace amp::cuda {

// reduction: 0 none (b replaces a), 1 add, 2 mul, 3 max, 4 min (opset 18's, ai.onnx_amp's
// ScatterElements / ScatterND), as the ops' shape structs carry it (scatter_reduction.h). Max and
// min take a NaN from either side, as the CPU's (numpy's maximum / minimum, PyTorch's amax / amin).
template <class T, class C>
__device__ __forceinline__ T scatter_pick(T a, T b, C fa, C fb, int reduction) {
  if (reduction == 3) return (fb > fa || fb != fb) ? b : a;
  return (fb < fa || fb != fb) ? b : a;
}
template <class T>
__device__ __forceinline__ T scatter_combine(T a, T b, int reduction) {
  if (reduction == 0) return b;
  if (reduction >= 3) return scatter_pick(a, b, a, b, reduction);
  return reduction == 2 ? static_cast<T>(a * b) : static_cast<T>(a + b);
}
template <>
__device__ __forceinline__ bool scatter_combine<bool>(bool a, bool b, int reduction) {
  // add and max: or; mul and min: and.
  return reduction == 0 ? b : (reduction == 2 || reduction == 4) ? (a && b) : (a || b);
}
template <>
__device__ __forceinline__ __half scatter_combine<__half>(__half a, __half b, int reduction) {
  if (reduction == 0) return b;
  if (reduction >= 3) return scatter_pick(a, b, to_float(a), to_float(b), reduction);
  return from_float<__half>(reduction == 2 ? to_float(a) * to_float(b) : to_float(a) + to_float(b));
}
template <>
__device__ __forceinline__ __nv_bfloat16 scatter_combine<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b,
                                                                         int reduction) {
  if (reduction == 0) return b;
  if (reduction >= 3) return scatter_pick(a, b, to_float(a), to_float(b), reduction);
  return from_float<__nv_bfloat16>(reduction == 2 ? to_float(a) * to_float(b) : to_float(a) + to_float(b));
}

// Calls f(T{}) with T the storage type of t, any of the 13 element types; InputError naming `op`.
template <class F>
void dispatch_scatter_type(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::kFloat: f(float{}); break;
    case DType::kFloat16: f(__half{}); break;
    case DType::kBFloat16: f(__nv_bfloat16{}); break;
    case DType::kDouble: f(double{}); break;
    case DType::kInt8: f(int8_t{}); break;
    case DType::kInt16: f(int16_t{}); break;
    case DType::kInt32: f(int32_t{}); break;
    case DType::kInt64: f(int64_t{}); break;
    case DType::kUInt8: f(uint8_t{}); break;
    case DType::kUInt16: f(uint16_t{}); break;
    case DType::kUInt32: f(uint32_t{}); break;
    case DType::kUInt64: f(uint64_t{}); break;
    case DType::kBool: f(bool{}); break;
    default: throw InputError(std::string(op) + " cannot add or multiply " + std::string(dtype_name(t)) + " on the GPU");
  }
}

}  // namespace amp::cuda
