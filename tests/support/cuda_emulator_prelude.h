// Force-included (-include) into every backends/cuda/*.cu after tests/support/
// cuda_rewrite_launches.py has turned its launches into amp_emu::launch calls: what makes CUDA
// C++ compile as host C++ and run on the emulator of cuda_emulator.h.
//
// Order matters. First every header the .cu files and their .cuh headers include, unchanged (the
// CUDA runtime, fp16 and bf16 headers compile as host C++; their host conversions are exact
// round-to-nearest-even, as the GPU's); their include guards make the .cu files' own #includes
// no-ops. Only then the macros: CUDA keywords, built-in variables, intrinsics and runtime calls,
// so no header sees them.
//
// The namespace: `cuda` becomes `cuda_emulated`, so these translation units define
// amp::cuda_emulated::softmax_forward and friends. The test needs the CPU backend as reference,
// and the library it lives in (amp_backends) links amp_cuda — the real launchers in namespace
// amp::cuda — because make_backend() calls into it: same names in one executable would be
// duplicate symbols, or worse, one silently standing in for the other. A renamed namespace keeps
// both, with types (CrossEntropyShape, ReducePlan, ...) that cannot be mixed up either.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/dtype.h"
#include "graph/error.h"
#include "tests/support/cuda_emulator.h"

// AMP_EMU_REAL_RUNTIME (tests/cuda_backend_emulated/, where the whole CUDA backend runs on host
// stand-ins of the CUDA libraries and the real amp_cuda is not linked): no rename, and no runtime
// call is a macro here, so the launchers call cuda_check.cc's check_cuda and the stand-in runtime's
// cudaMemsetAsync, cudaGetLastError, ... like the rest of the backend; kernel launches go through
// the runtime's stream capture (amp_emu::detail::set_launch_hook).
#ifndef AMP_EMU_REAL_RUNTIME

// ---- What backends/cuda/cuda_check.h declares, in the renamed namespace ---------------------

namespace amp_emu {

inline const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration (emulated launch refused)";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    default: return "a CUDA error";
  }
}

}  // namespace amp_emu

namespace amp::cuda_emulated {

// cuda_check.h declares it (its definition, in cuda_check.cc, is the real library's); defined
// inline here, before that declaration, so each emulated translation unit has it.
inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                amp_emu::error_name(status));
}

}  // namespace amp::cuda_emulated

#endif  // AMP_EMU_REAL_RUNTIME

// ---- Device-side helpers ---------------------------------------------------------------------

namespace amp_emu {

// Shuffles of any 1-, 2-, 4- or 8-byte value: its bytes travel.
template <class T>
T shfl(WarpOp op, const char* name, const char* file, int line, unsigned mask, T var, int arg, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = detail::warp_op(op, name, file, line, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline unsigned vote(WarpOp op, const char* name, const char* file, int line, unsigned mask, int predicate) {
  return static_cast<unsigned>(detail::warp_op(op, name, file, line, mask, predicate != 0, 0, 32));
}

template <class To, class From>
To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "a reinterpretation keeps the size");
  To out;
  std::memcpy(&out, &v, sizeof(To));
  return out;
}

inline void syncwarp(const char* file, int line, unsigned mask = 0xffffffffu) {
  detail::warp_op(WarpOp::kSyncWarp, "__syncwarp", file, line, mask, 0, 0, 32);
}

// Math functions the kernels call by their libm names (expf, logf, sqrtf, ...) are the host's
// libm: CUDA's expf and logf are within 2 ulp, glibc's within 1, so results can differ from the
// device's in the last bit or two (sqrtf and division are correctly rounded on both).
//
// The fast-math intrinsics, modelled on what the GPU computes rather than on libm. Their results
// can differ from the GPU's in the last bits: the GPU's ex2.approx / lg2.approx / rsqrt.approx
// are approximations (about 2 ulp) where the host's exp2f / log2f / sqrtf are (nearly) exact. What
// is the GPU's here: the argument scaled by log2(e) and rounded to float before the exponential
// (so __expf's error grows with |x|, as on the device), flush-to-zero of subnormal results and
// operands, and __fdividef's 0 for divisors above 2^126.
inline float ftz(float x) { return std::fabs(x) < 1.17549435e-38f ? std::copysign(0.0f, x) : x; }
inline float fast_exp(float x) { return ftz(std::exp2f(ftz(x) * 1.44269504f)); }
inline float fast_exp10(float x) { return ftz(std::exp2f(ftz(x) * 3.32192809f)); }
inline float fast_log(float x) { return std::log2f(ftz(x)) * 0.693147181f; }
inline float fast_log2(float x) { return std::log2f(ftz(x)); }
inline float fast_div(float x, float y) {
  const float ay = std::fabs(y);
  if (ay > 8.50705917e37f && ay < INFINITY) return std::isfinite(x) ? 0.0f : NAN;  // 2^126 < |y| < 2^128
  return x / y;
}
inline float fast_rsqrt(float x) { return 1.0f / std::sqrt(ftz(x)); }
inline float fast_rcp(float x) { return 1.0f / ftz(x); }
inline float saturate(float x) { return x != x ? 0.0f : std::min(1.0f, std::max(0.0f, x)); }
inline float sin_approx(float x) { return std::sin(x); }
inline float cos_approx(float x) { return std::cos(x); }
inline float tan_approx(float x) { return std::tan(x); }
inline float pow_approx(float x, float y) { return std::pow(x, y); }

// Atomics: the fiber that runs is the only one, so a plain read-modify-write is atomic.
template <class T>
T atomic_add(T* p, T v) {
  const T old = *p;
  *p = static_cast<T>(old + v);
  return old;
}
template <class T>
T atomic_sub(T* p, T v) {
  const T old = *p;
  *p = static_cast<T>(old - v);
  return old;
}
template <class T>
T atomic_exch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
T atomic_min(T* p, T v) {
  const T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <class T>
T atomic_max(T* p, T v) {
  const T old = *p;
  *p = v > old ? v : old;
  return old;
}
template <class T>
T atomic_and(T* p, T v) {
  const T old = *p;
  *p = old & v;
  return old;
}
template <class T>
T atomic_or(T* p, T v) {
  const T old = *p;
  *p = old | v;
  return old;
}
template <class T>
T atomic_xor(T* p, T v) {
  const T old = *p;
  *p = old ^ v;
  return old;
}
template <class T>
T atomic_cas(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}
inline unsigned atomic_inc(unsigned* p, unsigned limit) {
  const unsigned old = *p;
  *p = old >= limit ? 0 : old + 1;
  return old;
}
inline unsigned atomic_dec(unsigned* p, unsigned limit) {
  const unsigned old = *p;
  *p = (old == 0 || old > limit) ? limit : old - 1;
  return old;
}

}  // namespace amp_emu

// CUDA's device min/max overloads, in the global namespace as CUDA has them (the .cu files call
// them unqualified, e.g. min(r, begin + chunk) on int64_t). std::min/std::max are untouched.
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- The macros: nothing included after this point is a header of the toolkit's ---------------

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
// The launch rewriter turns __shared__ variables in functions into statics it poisons per block,
// and `extern __shared__` arrays into pointers to the launch's dynamic shared memory; what is
// left (a __shared__ at namespace scope) is a plain static, one object for every fiber of the
// running block: __shared__'s semantics, since blocks run one after another.
#define __shared__ static
#define __constant__ static

#define threadIdx (static_cast<const uint3&>(::amp_emu::detail::g_thread_idx))
#define blockIdx (static_cast<const uint3&>(::amp_emu::detail::g_block_idx))
#define blockDim (static_cast<const dim3&>(::amp_emu::detail::g_block_dim))
#define gridDim (static_cast<const dim3&>(::amp_emu::detail::g_grid_dim))
#define warpSize 32

#define __syncthreads() ::amp_emu::detail::syncthreads(__FILE__, __LINE__)
#define __syncthreads_count(p) ::amp_emu::detail::syncthreads_reduce(0, (p), __FILE__, __LINE__)
#define __syncthreads_and(p) ::amp_emu::detail::syncthreads_reduce(1, (p), __FILE__, __LINE__)
#define __syncthreads_or(p) ::amp_emu::detail::syncthreads_reduce(2, (p), __FILE__, __LINE__)
#define __syncwarp(...) ::amp_emu::syncwarp(__FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_sync(...) ::amp_emu::shfl(::amp_emu::WarpOp::kShflIdx, "__shfl_sync", __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::amp_emu::shfl(::amp_emu::WarpOp::kShflUp, "__shfl_up_sync", __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) \
  ::amp_emu::shfl(::amp_emu::WarpOp::kShflDown, "__shfl_down_sync", __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::amp_emu::shfl(::amp_emu::WarpOp::kShflXor, "__shfl_xor_sync", __FILE__, __LINE__, __VA_ARGS__)
#define __any_sync(...) static_cast<int>(::amp_emu::vote(::amp_emu::WarpOp::kAny, "__any_sync", __FILE__, __LINE__, __VA_ARGS__))
#define __all_sync(...) static_cast<int>(::amp_emu::vote(::amp_emu::WarpOp::kAll, "__all_sync", __FILE__, __LINE__, __VA_ARGS__))
#define __ballot_sync(...) ::amp_emu::vote(::amp_emu::WarpOp::kBallot, "__ballot_sync", __FILE__, __LINE__, __VA_ARGS__)
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)
#define __trap() ::amp_emu::detail::trap(__FILE__, __LINE__)
#define AMP_CHECK_VECTOR_ALIGNMENT(p, n) ::amp_emu::detail::check_aligned((p), (n), __FILE__, __LINE__)

#define __expf(x) ::amp_emu::fast_exp(x)
#define __exp10f(x) ::amp_emu::fast_exp10(x)
#define __logf(x) ::amp_emu::fast_log(x)
#define __log2f(x) ::amp_emu::fast_log2(x)
#define __fdividef(x, y) ::amp_emu::fast_div((x), (y))
#define __frcp_rn(x) (1.0f / static_cast<float>(x))
#define rsqrtf(x) ::amp_emu::fast_rsqrt(static_cast<float>(x))
#define __saturatef(x) ::amp_emu::saturate(x)
#define __sinf(x) ::amp_emu::sin_approx(x)
#define __cosf(x) ::amp_emu::cos_approx(x)
#define __tanf(x) ::amp_emu::tan_approx(x)
#define __powf(x, y) ::amp_emu::pow_approx((x), (y))
// The _rn arithmetic: IEEE round-to-nearest, never contracted into an FMA (the emulated files are
// compiled with -ffp-contract=off; on the GPU, nvcc contracts other a * b + c, so last bits of
// results can differ from the device's there).
#define __fmul_rn(x, y) (static_cast<float>(x) * static_cast<float>(y))
#define __fadd_rn(x, y) (static_cast<float>(x) + static_cast<float>(y))
#define __fsub_rn(x, y) (static_cast<float>(x) - static_cast<float>(y))
#define __fdiv_rn(x, y) (static_cast<float>(x) / static_cast<float>(y))
#define __fsqrt_rn(x) std::sqrt(static_cast<float>(x))
#define __dadd_rn(x, y) (static_cast<double>(x) + static_cast<double>(y))
#define __dsub_rn(x, y) (static_cast<double>(x) - static_cast<double>(y))
#define __dmul_rn(x, y) (static_cast<double>(x) * static_cast<double>(y))
#define __ldg(p) (*(p))
#define __float_as_uint(x) ::amp_emu::bit_cast<unsigned>(static_cast<float>(x))
#define __float_as_int(x) ::amp_emu::bit_cast<int>(static_cast<float>(x))
#define __uint_as_float(x) ::amp_emu::bit_cast<float>(static_cast<unsigned>(x))
#define __int_as_float(x) ::amp_emu::bit_cast<float>(static_cast<int>(x))
#define __popc(x) __builtin_popcount(x)
#define __popcll(x) __builtin_popcountll(x)
#define __clz(x) ((x) == 0 ? 32 : __builtin_clz(x))
#define __ffs(x) __builtin_ffs(x)

#define atomicAdd ::amp_emu::atomic_add
#define atomicSub ::amp_emu::atomic_sub
#define atomicExch ::amp_emu::atomic_exch
#define atomicMin ::amp_emu::atomic_min
#define atomicMax ::amp_emu::atomic_max
#define atomicAnd ::amp_emu::atomic_and
#define atomicOr ::amp_emu::atomic_or
#define atomicXor ::amp_emu::atomic_xor
#define atomicCAS ::amp_emu::atomic_cas
#define atomicInc ::amp_emu::atomic_inc
#define atomicDec ::amp_emu::atomic_dec

#ifndef AMP_EMU_REAL_RUNTIME
// The runtime calls the launchers make, on host memory standing in for device memory: the
// emulator runs every launch to its end before returning, so the stream is always idle.
#define cudaGetLastError ::amp_emu::detail::take_last_error
#define cudaPeekAtLastError ::amp_emu::detail::peek_last_error
#define cudaMemsetAsync ::amp_emu::memset_async
#define cudaMemset ::amp_emu::memset_async
#define cudaMemcpyAsync ::amp_emu::memcpy_async
#define cudaMemcpy ::amp_emu::memcpy_async
#define cudaStreamSynchronize(...) cudaSuccess
#define cudaDeviceSynchronize() cudaSuccess
#define cudaGetErrorString ::amp_emu::error_name

#define cuda cuda_emulated

namespace amp_emu {

inline cudaError_t memset_async(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  if (bytes) std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t = nullptr) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace amp_emu

#endif  // AMP_EMU_REAL_RUNTIME
