// The ReLU bitmask of cuBLASLt's RELU_AUX_BIAS / DRELU epilogues, written and applied by kernels
// of our own when cuBLASLt has no algorithm with those epilogues for a product (gemm.h): the mask
// a forward product leaves is always the bitmask its backward expects, whichever of them runs
// with the epilogue. One bit per element is 1/8 of the bool mask it replaces (1/16 of an fp16
// one), and a row is padded to 128 bits as cuBLASLt requires. cuBLASLt documents the bit index
// (r * ld + j), not the order within a byte: the one taken here, bit i % 8 of byte i / 8, is checked
// against cuBLASLt on a GPU (CudaBackendGpu.ReluEpiloguesWriteAndApplyTheMaskAsTheFallbackKernelsDo).
#include "backends/cuda/relu_mask.cuh"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"

namespace amp::cuda {
namespace {

// One 32-bit word of the mask per thread: 32 elements of a row, stored with one write.
template <class T>
__global__ void write_relu_mask_kernel(const T* __restrict__ y, unsigned* __restrict__ mask, long long rows,
                                       long long cols, long long words_per_row) {
  const long long words = rows * words_per_row;
  for (long long w = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; w < words;
       w += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = w / words_per_row, j0 = (w % words_per_row) * 32;
    unsigned bits = 0;
    for (int j = 0; j < 32 && j0 + j < cols; ++j) bits |= static_cast<unsigned>(to_float(y[r * cols + j0 + j]) > 0.0f) << j;
    mask[w] = bits;
  }
}

template <class T>
__global__ void apply_relu_mask_kernel(T* __restrict__ dy, const unsigned char* __restrict__ mask, long long rows,
                                       long long cols, long long ld) {
  const long long n = rows * cols;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long bit = i / cols * ld + i % cols;
    if (!((mask[bit / 8] >> (bit % 8)) & 1)) dy[i] = from_float<T>(0.0f);
  }
}

}  // namespace

void write_relu_mask(DType t, const void* y, void* mask, int64_t rows, int64_t cols, int64_t ld, int sm_count,
                     cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t words_per_row = ld / 32;
  dispatch_float(t, "the ReLU mask", [&](auto tag) {
    using T = decltype(tag);
    write_relu_mask_kernel<T><<<grid_stride_blocks(rows * words_per_row, sm_count), 256, 0, stream>>>(
        static_cast<const T*>(y), static_cast<unsigned*>(mask), rows, cols, words_per_row);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

void apply_relu_mask(DType t, void* dy, const void* mask, int64_t rows, int64_t cols, int64_t ld, int sm_count,
                     cudaStream_t stream) {
  if (rows * cols == 0) return;
  dispatch_float(t, "the ReLU mask", [&](auto tag) {
    using T = decltype(tag);
    apply_relu_mask_kernel<T><<<grid_stride_blocks(rows * cols, sm_count), 256, 0, stream>>>(
        static_cast<T*>(dy), static_cast<const unsigned char*>(mask), rows, cols, ld);
  });
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
