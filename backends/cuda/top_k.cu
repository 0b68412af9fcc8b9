// TopK on the device (top_k.cuh): a block of 256 threads per lane, in a grid-stride loop over the
// lanes. Round j: each thread keeps the best of its elements (a stride of the lane) that rank after
// pick j - 1, the block reduces those to pick j (warp shuffles, then a warp over the warps'
// winners), and thread 0 writes it. Candidates compare by the CPU's order: no ties, so the picks
// are the CPU's whatever the reduction's shape.
#include "backends/cuda/top_k.cuh"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/float_types.cuh"
#include "graph/error.h"

namespace amp::cuda {
namespace {

constexpr int kThreads = 256;

// The type elements compare in: fp32 for the 16-bit types, else the storage type.
template <class T>
struct Key {
  using type = T;
  static __device__ __forceinline__ T of(T v) { return v; }
};
template <>
struct Key<__half> {
  using type = float;
  static __device__ __forceinline__ float of(__half v) { return __half2float(v); }
};
template <>
struct Key<__nv_bfloat16> {
  using type = float;
  static __device__ __forceinline__ float of(__nv_bfloat16 v) { return __bfloat162float(v); }
};

// Whether (va, a) ranks before (vb, b); an index below 0 is no element and ranks last.
template <class K>
__device__ __forceinline__ bool before(K va, int64_t a, K vb, int64_t b, bool largest) {
  if (a < 0) return false;
  if (b < 0) return true;
  const bool na = va != va, nb = vb != vb;  // NaN ranks above every number
  if (na || nb) return na && nb ? a < b : largest ? na : nb;
  if (va != vb) return largest ? va > vb : va < vb;
  return a < b;
}

template <class T>
__global__ void __launch_bounds__(kThreads) top_k_kernel(TopKShape s, const T* __restrict__ x, T* __restrict__ values,
                                                        int64_t* __restrict__ indices) {
  using K = typename Key<T>::type;
  __shared__ K warp_value[kThreads / 32];
  __shared__ int64_t warp_index[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t l = blockIdx.x; l < s.outer * s.inner; l += gridDim.x) {
    const int64_t o = l / s.inner, i = l % s.inner;
    const T* line = x + o * s.extent * s.inner + i;
    K prev_value = K();
    int64_t prev = -1;  // no pick yet: every element ranks after it
    for (int64_t j = 0; j < s.k; ++j) {
      K best_value = K();
      int64_t best = -1;
      for (int64_t e = threadIdx.x; e < s.extent; e += blockDim.x) {
        const K v = Key<T>::of(line[e * s.inner]);
        if ((prev < 0 || before(prev_value, prev, v, e, s.largest)) && before(v, e, best_value, best, s.largest)) {
          best_value = v;
          best = e;
        }
      }
      for (int offset = 16; offset > 0; offset >>= 1) {
        const K v = __shfl_xor_sync(0xffffffffu, best_value, offset);
        const int64_t e = __shfl_xor_sync(0xffffffffu, best, offset);
        if (before(v, e, best_value, best, s.largest)) {
          best_value = v;
          best = e;
        }
      }
      __syncthreads();  // the previous round's winners have been read
      if (lane == 0) {
        warp_value[warp] = best_value;
        warp_index[warp] = best;
      }
      __syncthreads();
      best_value = lane < warps ? warp_value[lane] : K();
      best = lane < warps ? warp_index[lane] : -1;
      for (int offset = 16; offset > 0; offset >>= 1) {
        const K v = __shfl_xor_sync(0xffffffffu, best_value, offset);
        const int64_t e = __shfl_xor_sync(0xffffffffu, best, offset);
        if (before(v, e, best_value, best, s.largest)) {
          best_value = v;
          best = e;
        }
      }
      // Every lane of every warp holds the same winner: the next round starts from it.
      prev_value = best_value;
      prev = best;
      if (threadIdx.x == 0) {
        const int64_t at = (o * s.k + j) * s.inner + i;
        values[at] = line[best * s.inner];
        if (indices) indices[at] = best;
      }
    }
  }
}

}  // namespace

TopKShape top_k_shape(const std::vector<int64_t>& dims, int64_t axis, int64_t k, bool largest) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) throw InputError("TopK needs an input of rank >= 1");
  if (axis < -rank || axis >= rank) throw InputError("TopK axis " + std::to_string(axis) + " is out of range");
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  TopKShape s;
  s.extent = dims[a];
  for (size_t d = 0; d < a; ++d) s.outer *= dims[d];
  for (size_t d = a + 1; d < dims.size(); ++d) s.inner *= dims[d];
  if (k < 0 || k > s.extent)
    throw InputError("TopK's K " + std::to_string(k) + " is outside [0, " + std::to_string(s.extent) + "]");
  s.k = k;
  s.largest = largest;
  return s;
}

void top_k(DType t, const TopKShape& s, const void* x, void* values, int64_t* indices, int sm_count,
           cudaStream_t stream) {
  const int64_t lanes = s.outer * s.inner;
  if (lanes * s.k == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(lanes, 8LL * sm_count));
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    top_k_kernel<T><<<blocks, kThreads, 0, stream>>>(s, static_cast<const T*>(x), static_cast<T*>(values), indices);
  };
  switch (t) {
    case DType::kFloat: launch(float{}); break;
    case DType::kFloat16: launch(__half{}); break;
    case DType::kBFloat16: launch(__nv_bfloat16{}); break;
    case DType::kDouble: launch(double{}); break;
    case DType::kInt32: launch(int32_t{}); break;
    case DType::kInt64: launch(int64_t{}); break;
    default:
      throw InputError("TopK on cuda takes float, float16, bfloat16, double, int32 or int64, not " +
                       std::string(dtype_name(t)));
  }
  AMP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace amp::cuda
