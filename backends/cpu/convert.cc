#include "backends/cpu/convert.h"

#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/vector_clones.h"

namespace amp::cpu {
namespace {

// The last n % 8 elements go through an 8-wide staging buffer: rows of convolutions are short
// (28 pixels), and a scalar tail was a third of their cost.
__attribute__((target("avx2,f16c"))) void widen_f16c(const f16* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  if (i == n) return;
  alignas(32) f16 staged[8] = {};
  alignas(32) float wide[8];
  std::copy(in + i, in + n, staged);
  _mm256_store_ps(wide, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(staged))));
  std::copy(wide, wide + (n - i), out + i);
}

__attribute__((target("avx2,f16c"))) void narrow_f16c(const float* in, f16* out, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kRound));
  if (i == n) return;
  alignas(32) float staged[8] = {};
  alignas(32) f16 narrow[8];
  std::copy(in + i, in + n, staged);
  _mm_store_si128(reinterpret_cast<__m128i*>(narrow), _mm256_cvtps_ph(_mm256_load_ps(staged), kRound));
  std::copy(narrow, narrow + (n - i), out + i);
}

const bool kHaveF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");

}  // namespace

void widen(const f16* in, float* out, int64_t n) {
  if (kHaveF16c) return widen_f16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(in[i].bits);
}

void narrow(const float* in, f16* out, int64_t n) {
  if (kHaveF16c) return narrow_f16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i].bits = fp32_to_fp16(in[i]);
}

// bf16 is the top half of an fp32: both directions vectorize once asked to (-O2 alone will not).
AMP_VECTOR_CLONES void widen(const bf16* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(in[i].bits);
}

AMP_VECTOR_CLONES void narrow(const float* in, bf16* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i].bits = fp32_to_bf16(in[i]);
}

}  // namespace amp::cpu
