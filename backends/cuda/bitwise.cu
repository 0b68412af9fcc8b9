// The bitwise ops on the device (bitwise.cuh).
#include "backends/cuda/bitwise.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(256) bitwise_kernel(BroadcastOperands b, BitwiseOp op, const T* __restrict__ x,
                                                      const T* __restrict__ y, T* __restrict__ out) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < b.numel;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ax = 0, ay = 0, rest = o;
    for (int d = b.rank - 1; d >= 0; --d) {
      const int64_t c = rest % b.dims[d];
      rest /= b.dims[d];
      ax += c * b.strides[0][d];
      if (op != BitwiseOp::kNot) ay += c * b.strides[1][d];
    }
    const T v = x[ax];
    switch (op) {
      case BitwiseOp::kAnd: out[o] = static_cast<T>(v & y[ay]); break;
      case BitwiseOp::kOr: out[o] = static_cast<T>(v | y[ay]); break;
      case BitwiseOp::kXor: out[o] = static_cast<T>(v ^ y[ay]); break;
      case BitwiseOp::kNot: out[o] = static_cast<T>(~v); break;
    }
  }
}

}  // namespace

void bitwise(BitwiseOp op, DType t, const BroadcastOperands& b, const void* x, const void* y, void* out, int sm_count,
             cudaStream_t stream) {
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (b.numel == 0) return;
    bitwise_kernel<T><<<grid_stride_blocks(b.numel, sm_count), 256, 0, stream>>>(
        b, op, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out));
    AMP_CUDA_CHECK(cudaGetLastError());
  };
  switch (t) {
    case DType::kInt8: go(int8_t{}); break;
    case DType::kInt16: go(int16_t{}); break;
    case DType::kInt32: go(int32_t{}); break;
    case DType::kInt64: go(int64_t{}); break;
    case DType::kUInt8: go(uint8_t{}); break;
    case DType::kUInt16: go(uint16_t{}); break;
    case DType::kUInt32: go(uint32_t{}); break;
    case DType::kUInt64: go(uint64_t{}); break;
    default: throw InputError("the bitwise ops take integer tensors, not " + std::string(dtype_name(t)));
  }
}

}  // namespace amp::cuda
