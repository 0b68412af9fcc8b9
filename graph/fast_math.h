// exp and erf in fp32 written for vector units: straight-line polynomial code with selects, no
// calls and no branches, so GCC vectorises a loop that uses them (glibc's expf and erff are calls
// a loop cannot vectorise: GELU, its gradient and softmax spent most of their time in them).
//
// Accuracy, measured against float64 over every range (tests/graph/fast_math_test.cc):
// amp_expf within 1 ulp for normal results (n = x / ln 2 rounded by adding 1.5 * 2^23, read back
// from the sum's bits, so a NaN needs no test of its own; Cody-Waite reduction by ln 2, degree-6
// polynomial, scaling by 2^n in two steps so that subnormal results come out too); amp_erff within 1.3 ulp
// (|x| < 1: x + x R(x^2), R of degree 6 fitted for relative error; 1 <= |x| < 3.92:
// 1 - exp(-x^2) Q(1/x), with x^2 split exactly into hi + lo so its rounding does not reach the
// result; beyond, +-1). NaN propagates; exp(+inf) = inf, exp(-inf) = 0. amp_erff_with_exp also
// hands out the exp(-x^2) it computes on the way (with x^2's rounding corrected, 0 from x^2 = 104
// on, where it underflows; 0 for a NaN): GELU's gradient needs both, and one exp is a quarter of
// its arithmetic.
//
// One source for host and device: the functions are written once in AMP_FAST_MATH_FUNCTIONS and
// expanded here for the host and, as text, into the generated CUDA kernels
// (fast_math_source()), so the CPU kernels, the fused-program evaluator and the GPU compute the
// same operations in the same order (NVRTC may contract a * b + c into an FMA: a last-bit
// difference the GPU tests allow).
#pragma once

#include <cmath>
#include <cstdint>

#include "graph/half.h"

namespace amp {

// FN: the function qualifiers; AS_UINT / AS_FLOAT: the bit casts of each side.
#define AMP_FAST_MATH_FUNCTIONS(FN, AS_UINT, AS_FLOAT)                                                     \
  FN float amp_exp2i(int n) { return AS_FLOAT(static_cast<unsigned int>(n + 127) << 23); }                \
  FN float amp_expf(float x) {                                                                            \
    x = x > 88.8f ? 88.8f : x;                                                                            \
    x = x < -104.0f ? -104.0f : x;                                                                        \
    const float shifted = x * 1.44269504088896341f + 12582912.0f;                                         \
    const float n = shifted - 12582912.0f;                                                                \
    float r = x - n * 0.693359375f;                                                                       \
    r = r - n * -2.12194440e-4f;                                                                          \
    float p = 1.9875691500e-4f;                                                                           \
    p = p * r + 1.3981999507e-3f;                                                                         \
    p = p * r + 8.3334519073e-3f;                                                                         \
    p = p * r + 4.1665795894e-2f;                                                                         \
    p = p * r + 1.6666665459e-1f;                                                                         \
    p = p * r + 5.0000001201e-1f;                                                                         \
    const float y = (r * r * p + r) + 1.0f;                                                               \
    const int ni = static_cast<int>(AS_UINT(shifted) - 0x4b400000u);                                      \
    const int n1 = ni / 2;                                                                                \
    return y * amp_exp2i(n1) * amp_exp2i(ni - n1);                                                        \
  }                                                                                                       \
  FN float amp_erff_with_exp(float x, float* e) {                                                         \
    const float a = AS_FLOAT(AS_UINT(x) & 0x7fffffffu);                                                   \
    const float t = a * a;                                                                                \
    float r = 7.847262168070301e-05f;                                                                     \
    r = r * t + -0.0008008193108253181f;                                                                  \
    r = r * t + 0.0051880995742976665f;                                                                   \
    r = r * t + -0.026853691786527634f;                                                                   \
    r = r * t + 0.1128358244895935f;                                                                      \
    r = r * t + -0.3761262595653534f;                                                                     \
    r = r * t + 0.12837916612625122f;                                                                     \
    const float small = a + a * r;                                                                        \
    const float ah = AS_FLOAT(AS_UINT(a) & 0xfffff000u);                                                  \
    const float al = a - ah;                                                                              \
    const float lo = ((ah * ah - t) + 2.0f * ah * al) + al * al;                                          \
    const float s = 1.0f / (a > 1.0f ? a : 1.0f);                                                         \
    float q = -0.01100727915763855f;                                                                      \
    q = q * s + 0.036073338240385056f;                                                                    \
    q = q * s + 0.00834839977324009f;                                                                     \
    q = q * s + -0.2244771420955658f;                                                                     \
    q = q * s + 0.4850602149963379f;                                                                      \
    q = q * s + -0.4666210412979126f;                                                                     \
    q = q * s + 0.04072156175971031f;                                                                     \
    q = q * s + 0.559226393699646f;                                                                       \
    q = q * s + 0.0002591166412457824f;                                                                   \
    const float exp_t = amp_expf(-t) * (1.0f - lo);                                                       \
    const float big = 1.0f - exp_t * q;                                                                   \
    const float y = a >= 3.92f ? 1.0f : (a < 1.0f ? small : big);                                         \
    *e = t < 104.0f ? exp_t : 0.0f;                                                                       \
    return AS_FLOAT((AS_UINT(y) & 0x7fffffffu) | (AS_UINT(x) & 0x80000000u));                              \
  }                                                                                                       \
  FN float amp_erff(float x) {                                                                            \
    float e;                                                                                              \
    return amp_erff_with_exp(x, &e);                                                                      \
  }

AMP_FAST_MATH_FUNCTIONS(inline, float_bits, bits_float)  // graph/half.h's bit casts

// For code templated on its compute type: fp32 through the functions above, double through libm.
inline float fast_exp(float x) { return amp_expf(x); }
inline double fast_exp(double x) { return std::exp(x); }
inline float fast_erf(float x) { return amp_erff(x); }
inline double fast_erf(double x) { return std::erf(x); }
// erf(x) and exp(-x^2), the latter into *e.
inline float fast_erf_with_exp(float x, float* e) { return amp_erff_with_exp(x, e); }
inline double fast_erf_with_exp(double x, double* e) {
  *e = std::exp(-x * x);
  return std::erf(x);
}

// The same functions as CUDA source (__device__ __forceinline__, __float_as_uint, __uint_as_float).
const char* fast_math_source();

}  // namespace amp
