// Makes the CUDA C++ that backends/cuda/elementwise_codegen.cc generates valid host C++, so a test
// can compile the exact kernel source with the system compiler and run it on the CPU, one
// (block, thread) after another: no GPU has to be present for the index arithmetic, broadcast
// strides, grid-stride loops and task lists of the generated kernels to be executed
// (tests/backends/cuda_codegen_host_test.cc).
//
// What it replaces: the CUDA keywords the generator writes (defined away), the built-in launch
// coordinates (thread-local variables set before each thread runs), __uint_as_float, __float_as_uint, and the three
// conversions the prelude writes as inline PTX (it leaves them out when AMP_HOST_EMULATION is
// defined): cvt.f32.f16, cvt.rn.f16.f32 and cvt.rn.bf16.f32, here in software, computed another
// way than graph/half.h (the reference's conversions) so that each checks the other. Math
// functions (expf, erff, ...) are the host's libm.
//
// Include it before the kernels, in each file of the shared object; the driver there calls
// amp_host::launch(kernel, args, grid, block) with cudaLaunchKernel's argument array.
#pragma once

#include <math.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#define AMP_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct amp_host_uint3 {
  unsigned int x = 0, y = 0, z = 0;
};
// CUDA's built-in variables, for the (block, thread) running now; one set for the whole shared
// object, whichever of its files a kernel is in.
inline thread_local amp_host_uint3 threadIdx, blockIdx, blockDim, gridDim;

inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline unsigned int amp_host_float_bits(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}

// cvt.f32.f16: exact. A NaN comes back as a canonical NaN (0x7fffffff), as from the GPU; the
// tests compare NaN with NaN whatever the payload, so no result depends on these bits.
inline float amp_f16_to_f32(unsigned short h) {
  const unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const bool negative = (h & 0x8000u) != 0;
  if (e == 31) return m ? __uint_as_float(0x7fffffffu) : (negative ? -INFINITY : INFINITY);
  // A subnormal is m * 2^-24; a normal (1024 + m) * 2^(e - 25). Both exact in float.
  const float v =
      e == 0 ? ldexpf(static_cast<float>(m), -24) : ldexpf(static_cast<float>(1024 + m), static_cast<int>(e) - 25);
  return negative ? -v : v;
}

// Rounds |f| (finite) to a multiple of 2^ulp_exp, ties to even, where ulp_exp is the spacing of a
// format with `mantissa` stored bits and smallest spacing 2^min_exp at |f|. Exact in double.
inline double amp_host_round_magnitude(float f, int mantissa, int min_exp) {
  const double a = fabs(static_cast<double>(f));
  int e = 0;
  frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int ulp_exp = e - 1 - mantissa > min_exp ? e - 1 - mantissa : min_exp;
  return ldexp(nearbyint(ldexp(a, -ulp_exp)), ulp_exp);  // nearbyint: the default mode, ties to even
}

// cvt.rn.f16.f32: round to nearest even; past 65504 (from 65520 on) to inf; subnormals kept. A
// NaN becomes the canonical fp16 NaN (0x7fff).
inline unsigned short amp_f32_to_f16(float f) {
  if (f != f) return 0x7fffu;
  const unsigned short sign = signbit(f) ? 0x8000u : 0u;
  if (isinf(f)) return sign | 0x7c00u;
  const double r = amp_host_round_magnitude(f, 10, -24);
  if (r > 65504.0) return sign | 0x7c00u;
  if (r < ldexp(1.0, -14)) return sign | static_cast<unsigned short>(ldexp(r, 24));  // 2^-14 itself is 0x0400
  int e = 0;
  frexp(r, &e);  // r = 1.m * 2^(e - 1)
  const unsigned int mantissa = static_cast<unsigned int>(ldexp(r, 11 - e)) - 1024u;
  return sign | static_cast<unsigned short>((static_cast<unsigned int>(e - 1 + 15) << 10) | mantissa);
}

// cvt.rn.bf16.f32: round to nearest even; past the largest bf16 to inf; subnormals kept. A NaN
// becomes the canonical bf16 NaN (0x7fff).
inline unsigned short amp_f32_to_bf16(float f) {
  if (f != f) return 0x7fffu;
  if (isinf(f)) return static_cast<unsigned short>(amp_host_float_bits(f) >> 16);
  // A bf16 value is a float whose low 16 bits are 0; rounded past the largest one, the float is inf.
  const float r = static_cast<float>(amp_host_round_magnitude(f, 7, -133));
  return static_cast<unsigned short>(amp_host_float_bits(signbit(f) ? -r : r) >> 16);
}

namespace amp_host {

template <class... A, size_t... I>
void call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
  // As cudaLaunchKernel does: args[i] points at the value of parameter i, copied in by value.
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

// kernel<<<grid, block>>>(args...) with cudaLaunchKernel's argument array: every thread of every
// block in turn, each running the kernel body to its end.
template <class... A>
void launch(void (*kernel)(A...), void** args, unsigned grid, unsigned block) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      call(kernel, args, std::index_sequence_for<A...>{});
    }
}

}  // namespace amp_host
