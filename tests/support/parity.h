// Random inputs and the comparison of a backend's results with the CPU backend's, shared by the
// CUDA parity tests (on a GPU or the host stand-ins) and the emulated kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "graph/half.h"
#include "graph/tensor.h"

namespace amp::test {

// Element k of a float, float16 or bfloat16 tensor set to v (rounded to the type).
inline void put_float(Tensor& x, int64_t k, float v) {
  if (x.dtype == DType::kFloat) x.mutable_as<float>()[k] = v;
  else if (x.dtype == DType::kFloat16) x.mutable_as<uint16_t>()[k] = fp32_to_fp16(v);
  else x.mutable_as<uint16_t>()[k] = fp32_to_bf16(v);
}

// Uniform in [lo, hi) (floored for integers, > 0 for bool), from `seed`.
inline Tensor random_tensor(DType t, std::vector<int64_t> dims, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor x(t, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const float v = u(rng);
    switch (t) {
      case DType::kFloat:
      case DType::kFloat16:
      case DType::kBFloat16: put_float(x, k, v); break;
      case DType::kInt64: x.mutable_as<int64_t>()[k] = static_cast<int64_t>(std::floor(v)); break;
      case DType::kInt32: x.mutable_as<int32_t>()[k] = static_cast<int32_t>(std::floor(v)); break;
      case DType::kBool: x.mutable_as<uint8_t>()[k] = v > 0; break;
      default: ADD_FAILURE() << "no random " << dtype_name(t);
    }
  }
  return x;
}

// Stored values compared as doubles: integers and bools exactly, floats within a tolerance that
// follows the type (different summation orders and libm ulps, nothing more) — rtol 1e-4 for fp32,
// 2e-3 for fp16 (2 ulp), 1.6e-2 for bf16 (2 ulp), relative to 1 + |cpu| — times tol_scale. At most
// `allowed` elements may miss it, none by more than `abs_cap`.
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double tol_scale = 1.0,
                         size_t allowed = 0, double abs_cap = INFINITY) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  double rtol = 0;
  if (want.dtype == DType::kFloat) rtol = 1e-4;
  if (want.dtype == DType::kFloat16) rtol = 2e-3;
  if (want.dtype == DType::kBFloat16) rtol = 1.6e-2;
  rtol *= tol_scale;
  size_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.element(i), b = want.element(i);
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    if (!(std::fabs(a - b) <= abs_cap)) ADD_FAILURE() << what << "[" << i << "]: " << a << ", cpu " << b << " beyond " << abs_cap;
    if (!(std::fabs(a - b) <= rtol * (1.0 + std::fabs(b))) && bad++ < 5 && allowed == 0)
      ADD_FAILURE() << what << "[" << i << "]: " << a << ", cpu " << b;
  }
  EXPECT_LE(bad, allowed) << what << ": " << bad << " of " << want.numel() << " elements differ";
}

}  // namespace amp::test
