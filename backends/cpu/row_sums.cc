#include "backends/cpu/row_sums.h"

namespace amp::cpu {
namespace {

template <class T>
inline __attribute__((always_inline)) double sum_of(const T* x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(load(x[i]));
  return s;
}

template <class T>
inline __attribute__((always_inline)) double sum_sq_dev_of(const T* x, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(load(x[i])) - mean;
    s += d * d;
  }
  return s;
}

template <class T>
inline __attribute__((always_inline)) double sum_prod_dev_of(const T* g, const T* x, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(load(g[i])) * (static_cast<double>(load(x[i])) - mean);
  return s;
}

}  // namespace

#define AMP_ROW_SUMS(T)                                                                          \
  __attribute__((target_clones("avx512f", "avx2", "default"))) double row_sum(const T* x, int64_t n) { \
    return sum_of(x, n);                                                                         \
  }                                                                                              \
  __attribute__((target_clones("avx512f", "avx2", "default"))) double row_sum_sq_dev(const T* x, int64_t n, \
                                                                                      double mean) { \
    return sum_sq_dev_of(x, n, mean);                                                            \
  }                                                                                              \
  __attribute__((target_clones("avx512f", "avx2", "default"))) double row_sum_prod_dev(           \
      const T* g, const T* x, int64_t n, double mean) {                                          \
    return sum_prod_dev_of(g, x, n, mean);                                                       \
  }

AMP_ROW_SUMS(float)
AMP_ROW_SUMS(double)
AMP_ROW_SUMS(f16)
AMP_ROW_SUMS(bf16)

#undef AMP_ROW_SUMS

}  // namespace amp::cpu
