// fp64 sums over a contiguous row of any float storage type, vectorised: the normalisation kernels'
// statistics (BatchNormalization and its gradient read every element three or four times). The
// lanes' partial sums are combined in an order fixed by the build, never by the number of cores,
// and each is built for the widest vector unit the CPU has (AVX-512, AVX2, or the x86-64 baseline),
// chosen once at load time.
#pragma once

#include <cstdint>

#include "backends/cpu/numeric.h"

namespace amp::cpu {

// Σ x
double row_sum(const float* x, int64_t n);
double row_sum(const double* x, int64_t n);
double row_sum(const f16* x, int64_t n);
double row_sum(const bf16* x, int64_t n);
// Σ (x - mean)²
double row_sum_sq_dev(const float* x, int64_t n, double mean);
double row_sum_sq_dev(const double* x, int64_t n, double mean);
double row_sum_sq_dev(const f16* x, int64_t n, double mean);
double row_sum_sq_dev(const bf16* x, int64_t n, double mean);
// Σ g (x - mean)
double row_sum_prod_dev(const float* g, const float* x, int64_t n, double mean);
double row_sum_prod_dev(const double* g, const double* x, int64_t n, double mean);
double row_sum_prod_dev(const f16* g, const f16* x, int64_t n, double mean);
double row_sum_prod_dev(const bf16* g, const bf16* x, int64_t n, double mean);

}  // namespace amp::cpu
