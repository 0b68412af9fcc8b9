// ReverseSequence on the device (reverse_sequence.cuh).
#include "backends/cuda/reverse_sequence.cuh"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

template <class E, class L>
__global__ void __launch_bounds__(256) reverse_sequence_kernel(ReverseSequenceShape s, const E* __restrict__ x,
                                                               const L* __restrict__ lens, E* __restrict__ y) {
  const int64_t n = s.steps * s.batch * s.block;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = o % s.block, r = o / s.block;
    const int64_t t = s.time_major ? r / s.batch : r % s.steps;
    const int64_t b = s.time_major ? r % s.batch : r / s.steps;
    const int64_t len = static_cast<int64_t>(lens[b]);
    const int64_t from = t < len ? len - 1 - t : t;
    const int64_t at = (s.time_major ? from * s.batch + b : b * s.steps + from) * s.block + e;
    y[o] = (len < 0 || len > s.steps) ? E{} : x[at];
  }
}

}  // namespace

ReverseSequenceShape reverse_sequence_shape(const std::vector<int64_t>& dims, int64_t time_axis, int64_t batch_axis,
                                            DType type, DType lens_type) {
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)))
    throw InputError("ReverseSequence's time_axis and batch_axis must be 0 and 1 (either way round), got " +
                     std::to_string(time_axis) + " and " + std::to_string(batch_axis));
  if (dims.size() < 2) throw InputError("ReverseSequence needs an input of rank >= 2");
  if (lens_type != DType::kInt32 && lens_type != DType::kInt64)
    throw InputError("ReverseSequence's sequence_lens must be int32 or int64, not " + std::string(dtype_name(lens_type)));
  ReverseSequenceShape s;
  s.time_major = time_axis == 0;
  s.steps = dims[static_cast<size_t>(time_axis)];
  s.batch = dims[static_cast<size_t>(batch_axis)];
  for (size_t d = 2; d < dims.size(); ++d) s.block *= dims[d];
  s.lens_type = lens_type;
  s.elem_bytes = dtype_size(type);
  return s;
}

void reverse_sequence(const ReverseSequenceShape& s, const void* x, const void* lens, void* y, int sm_count,
                      cudaStream_t stream) {
  const int64_t n = s.steps * s.batch * s.block;
  if (n == 0) return;
  auto with_lens = [&](auto ltag) {
    using L = decltype(ltag);
    auto go = [&](auto etag) {
      using E = decltype(etag);
      reverse_sequence_kernel<E, L><<<grid_stride_blocks(n, sm_count), 256, 0, stream>>>(
          s, static_cast<const E*>(x), static_cast<const L*>(lens), static_cast<E*>(y));
    };
    switch (s.elem_bytes) {
      case 1: go(uint8_t{}); break;
      case 2: go(uint16_t{}); break;
      case 4: go(uint32_t{}); break;
      case 8: go(uint64_t{}); break;
      default: throw InputError("ReverseSequence cannot move elements of " + std::to_string(s.elem_bytes) + " bytes");
    }
  };
  if (s.lens_type == DType::kInt32) with_lens(int32_t{});
  else with_lens(int64_t{});
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
