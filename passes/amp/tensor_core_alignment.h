// Tensor cores run fp16/bf16 products at full speed when the product's inner dimensions are
// multiples of 8 (cuBLAS and cuDNN otherwise fall back to slower kernels or pad internally). This
// finds the low-precision MatMul/Gemm/Conv/ConvTranspose nodes whose static dimensions are not, and
// says how much padding would fix each one. Grouped convolutions are not checked.
#pragma once

#include <string>
#include <vector>

#include "graph/model.h"
#include "passes/amp/colour.h"

namespace amp {

struct MisalignedDim {
  std::string role;  // "K (reduction)", "N (output columns)", "input channels", "output channels"
  int64_t size = 0;
  int64_t padded = 0;  // the next multiple of 8
};

struct MisalignedProduct {
  std::string node;  // node_ref()
  std::string op;
  std::vector<MisalignedDim> dims;
};

inline constexpr int64_t kTensorCoreMultiple = 8;

// Reads decisions for which nodes are low and the products' input shapes (the same before and after
// the rewrite).
std::vector<MisalignedProduct> find_misaligned_products(const AmpDecisions& decisions);

}  // namespace amp
