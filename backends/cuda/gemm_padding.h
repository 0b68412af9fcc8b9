// Products whose matrices have leading dimensions that are not multiples of 16 bytes, run on
// padded copies. cuBLASLt's Tensor Core kernels load 16 bytes at a time; a row-major matrix whose
// rows are, say, 50257 bf16 elements long (GPT-2's vocabulary: the language-model head's logits,
// their gradient and the head's weight gradient) leaves it only its 2-byte-aligned kernels: on an
// H100 (2026-11-27) sm75 `align1` kernels at 5.2 ms for the head's forward and input gradient,
// and for its weight gradient with the bias gradient (BGRADA) one algorithm, a CUDA-core
// `magma_sgemmEx_kernel` at 17.0 ms, where each product is 0.63 TFLOP (about 1 ms).
//
// Padded, the product cuBLASLt runs has m, n and k rounded up where they are a leading dimension
// (n always, D's; k for a row-major A or a transposed B; m for a transposed A) to 16 bytes of the
// type. The operands whose stored shape changes are copied into staging buffers (pitched copies,
// which a CUDA Graph captures), their padding filled with zeros, so the padded part of the sums adds 0
// and the padded rows and columns of D are never read; the bias a product adds is staged the same
// way. D and a bias gradient, when padded, are written into staging and copied out. The copies
// move each staged operand twice (about 0.5 ms for the 823 MB logits gradient at 8 x 1024 tokens
// on an H100), against the 10x slower kernels.
//
// Only single products (batch 1) without C (beta 0) and with no epilogue but the bias or the bias
// gradient are padded; the others run as they are (an aux matrix already has its own padded
// leading dimension, and GELU's input must be n wide: matmul_ops.cc rules it out).
//
// An A, B or D that the plan already stores padded (GemmDesc::a_stored_padded, ...;
// row_pitch.h: the language-model head's scores and their gradient, written so by the product
// and the loss's gradient) is read or written where it is: of the head's staging only the
// weight's and the bias's small copies are left.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/gemm.h"

namespace amp::cuda {

class GemmPadding {
 public:
  explicit GemmPadding(const GemmDesc& desc);

  // The alignment of the staging area and of every staged matrix in it (as arena buffers).
  static constexpr size_t kAlignment = 256;

  bool active() const { return active_; }
  // The product cuBLASLt runs: the description with m, n and k padded (the description itself
  // when inactive).
  const GemmDesc& run() const { return run_; }
  // Whether operand 0 (A), 1 (B) or 2 (D) may be stored padded for this product
  // (GemmDesc::a_stored_padded, ...): the padded product widens its rows, not their number, to
  // `pitch` elements.
  static bool takes_pitch(const GemmDesc& desc, int operand, int64_t pitch);
  // Bytes of staging the padded product needs, kAlignment-aligned pieces (0 when inactive).
  size_t staging_bytes() const { return bytes_; }
  // "[8192x768]x[768x50264]", the padded problem, for the device report.
  std::string padded_str() const;

  // Before the product: stages A, B and the bias it reads into `staging` and points a, b, d and
  // bias at what the product reads and writes (d and a bias gradient into staging where padded).
  void before(const void*& a, const void*& b, void*& d, void*& bias, uint8_t* staging, cudaStream_t stream) const;
  // After the product: copies D's and the bias gradient's real elements out of staging into
  // d_out and bias_out.
  void after(void* d_out, void* bias_out, const uint8_t* staging, cudaStream_t stream) const;

  // A row-major [rows, cols] matrix stored as [padded_rows, padded_cols] at byte `at` of the
  // staging area.
  struct Staged {
    int64_t rows = 0, cols = 0, padded_rows = 0, padded_cols = 0;
    size_t elem = 0, at = 0;
    bool in_place = false;  // stored padded already: read or written where it is
    bool used() const { return !in_place && (padded_rows != rows || padded_cols != cols); }
    size_t bytes() const { return static_cast<size_t>(padded_rows * padded_cols) * elem; }
  };

 private:
  GemmDesc desc_, run_;
  bool active_ = false;
  Staged a_, b_, d_, bias_, bias_grad_;
  size_t bytes_ = 0;
};

}  // namespace amp::cuda
