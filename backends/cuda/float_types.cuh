// Device-side helpers every hand-written kernel shares: the three float storage types (fp32,
// fp16, bf16) read into fp32 and written back with round-to-nearest-even, a switch from the
// graph's DType to the C++ type, and warp/block sums. Kernels store 16-bit values but compute in
// fp32 — the precision rules of the whole project (statistics, exponentials and sums in fp32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "graph/dtype.h"
#include "graph/error.h"

namespace amp::cuda {

// Blocks of 256 threads for a grid-stride loop over n elements: one element a thread, at most 8
// blocks per SM (each thread then loops), and never 0.
inline unsigned grid_stride_blocks(int64_t n, int sm_count) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 8LL * sm_count)));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// A misaligned vector access stops a kernel on a GPU (cudaErrorMisalignedAddress); the tests' CPU
// emulator (tests/support/cuda_emulator_prelude.h) defines this to check every one.
#ifndef AMP_CHECK_VECTOR_ALIGNMENT
#define AMP_CHECK_VECTOR_ALIGNMENT(p, n)
#endif

// Eight neighbouring elements from p into v as floats, and back (rounded to nearest even): one
// 16-byte access for a 16-bit type, two for fp32, so p must be 16-byte aligned.
template <class T>
__device__ __forceinline__ void load8(const T* __restrict__ p, float (&v)[8]) {
  AMP_CHECK_VECTOR_ALIGNMENT(p, 16);
  if constexpr (sizeof(T) == 2) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
    for (int j = 0; j < 8; ++j) v[j] = to_float(e[j]);
  } else {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

template <class T>
__device__ __forceinline__ void store8(T* __restrict__ p, const float (&v)[8]) {
  AMP_CHECK_VECTOR_ALIGNMENT(p, 16);
  if constexpr (sizeof(T) == 2) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
    for (int j = 0; j < 8; ++j) e[j] = from_float<T>(v[j]);
    *reinterpret_cast<uint4*>(p) = u;
  } else {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// f(c, x[c]) for every element c of a contiguous row of n, the block's threads taking turns: the
// elements before the row's first 16-byte boundary one a thread, then 8 a thread (one or two
// vector loads), then the rest one a thread. Each element is visited once, by a thread that
// depends on the row's alignment: use it where the order of visits does not matter (sums whose
// order may vary by the last bits, extremes with their own tie rule). A warp then moves 512 bytes
// of a 16-bit row a load instead of 64: a block per row of GPT-2's 50,257 scores read them at
// about a third of an H100's bandwidth one element a thread.
constexpr int kRowLoadsAhead = 4;

template <class T, class F>
__device__ __forceinline__ void for_row(const T* __restrict__ x, int64_t n, F&& f) {
  constexpr int64_t kPer16 = 16 / static_cast<int64_t>(sizeof(T));
  const int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x) % 16 / sizeof(T));
  const int64_t head = off ? (n < kPer16 - off ? n : kPer16 - off) : 0;
  for (int64_t c = threadIdx.x; c < head; c += blockDim.x) f(c, to_float(x[c]));
  const int64_t groups = (n - head) / 8, step = blockDim.x;
  int64_t g = threadIdx.x;
  // kRowLoadsAhead vector loads in flight a thread before the first of them is used (the same
  // visiting order as one at a time): a block per row of GPT-2's scores read them at 1.8-2.3 TB/s
  // on an H200 (2026-11-28) with one load in flight, about half its bandwidth.
  for (; g + (kRowLoadsAhead - 1) * step < groups; g += kRowLoadsAhead * step) {
    float v[kRowLoadsAhead][8];
    for (int u = 0; u < kRowLoadsAhead; ++u) load8(x + head + 8 * (g + u * step), v[u]);
    for (int u = 0; u < kRowLoadsAhead; ++u)
      for (int j = 0; j < 8; ++j) f(head + 8 * (g + u * step) + j, v[u][j]);
  }
  for (; g < groups; g += step) {
    const int64_t c0 = head + 8 * g;
    float v[8];
    load8(x + c0, v);
    for (int j = 0; j < 8; ++j) f(c0 + j, v[j]);
  }
  for (int64_t c = head + 8 * groups + threadIdx.x; c < n; c += blockDim.x) f(c, to_float(x[c]));
}

// y[c] = f(c, x[c]) over a contiguous row as for_row visits it; the 8 results of a thread's
// vector load are stored with one vector store where y + c is 16-byte aligned there too.
template <class T, class TY, class F>
__device__ __forceinline__ void map_row(const T* __restrict__ x, TY* __restrict__ y, int64_t n, F&& f) {
  constexpr int64_t kPer16 = 16 / static_cast<int64_t>(sizeof(T));
  const int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x) % 16 / sizeof(T));
  const int64_t head = off ? (n < kPer16 - off ? n : kPer16 - off) : 0;
  for (int64_t c = threadIdx.x; c < head; c += blockDim.x) y[c] = from_float<TY>(f(c, to_float(x[c])));
  const int64_t groups = (n - head) / 8, step = blockDim.x;
  const bool vector_out = reinterpret_cast<uintptr_t>(y + head) % 16 == 0;
  auto put = [&](int64_t c0, const float (&v)[8]) {
    if (vector_out) {
      store8(y + c0, v);
    } else {
      for (int j = 0; j < 8; ++j) y[c0 + j] = from_float<TY>(v[j]);
    }
  };
  int64_t g = threadIdx.x;
  for (; g + (kRowLoadsAhead - 1) * step < groups; g += kRowLoadsAhead * step) {  // as for_row
    float v[kRowLoadsAhead][8];
    for (int u = 0; u < kRowLoadsAhead; ++u) load8(x + head + 8 * (g + u * step), v[u]);
    for (int u = 0; u < kRowLoadsAhead; ++u) {
      const int64_t c0 = head + 8 * (g + u * step);
      for (int j = 0; j < 8; ++j) v[u][j] = f(c0 + j, v[u][j]);
      put(c0, v[u]);
    }
  }
  for (; g < groups; g += step) {
    const int64_t c0 = head + 8 * g;
    float v[8];
    load8(x + c0, v);
    for (int j = 0; j < 8; ++j) v[j] = f(c0 + j, v[j]);
    put(c0, v);
  }
  for (int64_t c = head + 8 * groups + threadIdx.x; c < n; c += blockDim.x) y[c] = from_float<TY>(f(c, to_float(x[c])));
}

// Calls f(T{}) with T the storage type of t; InputError for anything but the three float types.
template <class F>
void dispatch_float(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kFloat: f(float{}); break;
    case DType::kFloat16: f(__half{}); break;
    case DType::kBFloat16: f(__nv_bfloat16{}); break;
    default: throw InputError(std::string(what) + " takes float, float16 or bfloat16, not " + std::string(dtype_name(t)));
  }
}

// A kernel's storage types when an op absorbed the Casts around it (CudaOp::reads_any_float): its
// input and output all of type `t` (f gets three tags of t), or `t` float and the input and
// output of any float type (f gets their tags and float).
template <class F>
void dispatch_io(DType t, DType in, DType out, const char* what, F&& f) {
  if (in == t && out == t) {
    dispatch_float(t, what, [&](auto p) { f(p, p, p); });
    return;
  }
  if (t != DType::kFloat)
    throw InputError(std::string(what) + ": reads " + std::string(dtype_name(in)) + " and writes " +
                     std::string(dtype_name(out)) + " around " + std::string(dtype_name(t)) +
                     " parameters; only float parameters take other storage types");
  dispatch_float(in, what, [&](auto i) { dispatch_float(out, what, [&](auto o) { f(i, float{}, o); }); });
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// NaN wins, as in the CPU backend's max reductions (fmaxf would drop it).
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = (v > o || v != v) ? v : o;
  }
  return v;
}

// Sum over the block, returned to every thread. `scratch` holds one float per warp (32 is enough
// for 1024 threads). Every thread of the block must call it, and blockDim.x must be a multiple of
// 32: the shuffles name all 32 lanes of every warp.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace amp::cuda
