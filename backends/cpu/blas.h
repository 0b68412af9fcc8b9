// Row-major GEMM through OpenBLAS, overloaded on float and double so kernels stay type-generic.
// 16-bit tensors never reach here directly: kernels widen them to fp32 first, which makes the
// accumulation fp32 as on a GPU's tensor cores. OpenBLAS runs single-threaded (see
// executable.cc); parallel_gemm splits one product into row or column blocks over the cores.
#pragma once

#include <cblas.h>

#include <cstdint>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a,
                      int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a,
                      int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = alpha * op(A) op(B) + beta * C; F is float or double. Empty products are handled here:
// BLAS rejects a leading dimension of 0.
template <class F>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, F alpha, const F* a, int64_t lda, const F* b,
          int64_t ldb, F beta, F* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == F(0) ? F(0) : beta * c[i * ldc + j];
    return;
  }
  blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
            static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
            c, static_cast<int>(ldc));
}

// Below this many multiply-adds a product stays on one core.
constexpr int64_t kGemmGrain = 64 * 64 * 64;

// gemm over `threads` cores: blocks of rows of C (columns when C is wide and short), each an
// independent single-threaded product.
template <class F>
void parallel_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, F alpha, const F* a, int64_t lda,
                   const F* b, int64_t ldb, F beta, F* c, int64_t ldc, int threads) {
  const int64_t parts = std::min<int64_t>(threads, m * n * k / kGemmGrain);
  if (parts <= 1) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m >= n) {
    parallel_for(m, static_cast<int>(parts), 1, [&](int64_t r0, int64_t r1) {
      gemm(trans_a, trans_b, r1 - r0, n, k, alpha, trans_a ? a + r0 : a + r0 * lda, lda, b, ldb, beta, c + r0 * ldc,
           ldc);
    });
  } else {
    parallel_for(n, static_cast<int>(parts), 1, [&](int64_t c0, int64_t c1) {
      gemm(trans_a, trans_b, m, c1 - c0, k, alpha, a, lda, trans_b ? b + c0 * ldb : b + c0, ldb, beta, c + c0, ldc);
    });
  }
}

}  // namespace amp::cpu
