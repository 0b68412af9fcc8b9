// GELU and its derivative as ai.onnx_amp Gelu / GeluGrad define them (graph/amp_ops.cc), in one
// place: the CPU kernels and the fused-kernel evaluator both call these, so a fused group and the
// unfused graph compute the same bits. The generated CUDA kernels spell the same operations in the
// same order (backends/cuda/elementwise_codegen.cc).
//
// Exact:  gelu(x) = x/2 (1 + erf(x/sqrt 2)),  gelu'(x) = Phi(x) + x phi(x)
// Tanh:   gelu(x) = x/2 (1 + tanh(b (x + k x^3))), b = sqrt(2/pi), k = 0.044715 (GPT-2's gelu_new,
//         PyTorch's approximate="tanh", and what cuBLASLt's GELU epilogues compute)
// The derivatives follow PyTorch's GeluBackward kernels term by term, but for the exact one's
// exp(-x^2/2), which erf's evaluation has already computed (from x / sqrt 2 squared, its rounding
// corrected: the same value but for the last bits). In fp32, erf and exp are graph/fast_math.h's
// (vectorisable, within 1.3 ulp); the generated kernels call the same.
#pragma once

#include <cmath>
#include <optional>
#include <string_view>

#include "graph/fast_math.h"

namespace amp {


enum class GeluKind { kExact, kTanh };

// The `approximate` attribute of Gelu and GeluGrad: "none" or "tanh" (ONNX's Gelu, opset 20).
inline std::optional<GeluKind> gelu_kind(std::string_view approximate) {
  if (approximate == "none") return GeluKind::kExact;
  if (approximate == "tanh") return GeluKind::kTanh;
  return std::nullopt;
}

// The constants, each converted once to the compute type (the code generator writes the same
// float bits into the kernels).
inline constexpr double kGeluSqrtHalf = 0.70710678118654752440;      // 1 / sqrt(2)
inline constexpr double kGeluInvSqrt2Pi = 0.39894228040143267794;    // 1 / sqrt(2 pi)
inline constexpr double kGeluTanhBeta = 0.79788456080286535588;      // sqrt(2 / pi)
inline constexpr double kGeluTanhKappa = 0.044715;
inline constexpr double kGeluTanhKappa3 = 3 * 0.044715;

template <class F>
F gelu(F x, GeluKind kind) {
  const F half = F(0.5), one = F(1);
  if (kind == GeluKind::kExact) return x * half * (one + fast_erf(x * F(kGeluSqrtHalf)));
  const F inner = F(kGeluTanhBeta) * (x + F(kGeluTanhKappa) * (x * x * x));
  return x * half * (one + std::tanh(inner));
}

// dy * gelu'(x)
template <class F>
F gelu_grad(F dy, F x, GeluKind kind) {
  const F half = F(0.5), one = F(1);
  if (kind == GeluKind::kExact) {
    // exp(-x^2 / 2) is the exp(-(x / sqrt 2)^2) erf computes on its way (PyTorch computes it
    // apart: the same value up to the rounding of its argument).
    F exp_half_x_sq;
    const F cdf = half * (one + fast_erf_with_exp(x * F(kGeluSqrtHalf), &exp_half_x_sq));
    const F pdf = exp_half_x_sq * F(kGeluInvSqrt2Pi);
    return dy * (cdf + x * pdf);
  }
  const F x_sq = x * x;
  const F inner = F(kGeluTanhBeta) * (x + F(kGeluTanhKappa) * (x_sq * x));
  const F t = std::tanh(inner);
  const F left = half * x;
  const F right = one + t;
  const F left_derivative = half * right;
  const F right_derivative = left * (one - t * t) * (F(kGeluTanhBeta) * (one + F(kGeluTanhKappa3) * x_sq));
  return dy * (left_derivative + right_derivative);
}

}  // namespace amp
