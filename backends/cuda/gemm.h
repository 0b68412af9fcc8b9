// Matrix products through cuBLASLt. fp16/bf16 operands multiply on Tensor Cores with fp32
// accumulation (CUBLAS_COMPUTE_32F: 16-bit products summed in fp32, so a K=4096 dot product does
// not lose the small terms); fp32 operands use TF32 Tensor Cores only when allowed (10-bit
// mantissa: 495 vs 67 TFLOP/s on H100, a numerics change the user opts into).
//
// Work that would otherwise be a separate pass over the output happens in the epilogue:
// + bias (and ReLU) on the forward product, the bias gradient (a column sum of dY) on the weight
// gradient product. cuBLASLt is column-major; a row-major D = op(A) op(B) is computed as the
// column-major D^T = op(B)^T op(A)^T, which is the same bytes with A and B swapped.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "graph/dtype.h"
#include "graph/error.h"

namespace amp::cuda {

enum class GemmEpilogue : uint8_t {
  kNone,
  kBias,      // D += bias[n] on every row
  kReluBias,  // D = relu(D + bias[n])
  // Weight gradients that also write the bias gradient, the sums of dY over the batch rows:
  kBiasGradFromB,  // bias_grad[n] = column sums of op(B), for dW = X^T dY
  kBiasGradFromA,  // bias_grad[m] = row sums of op(A), for dW = dY^T X
};

// D[b] = alpha op(A[b]) op(B[b]) + beta C[b], row-major as ONNX lays tensors out; op() transposes
// when trans_*; D is [m, n]. Batch strides are in elements; 0 reuses one matrix for every batch.
struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // stride of D is m*n
  DType ab_type = DType::kFloat;  // A and B
  DType d_type = DType::kFloat;   // C and D
  float alpha = 1.0f, beta = 0.0f;  // beta != 0 reads C
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool tf32 = false;  // fp32 operands may use TF32 Tensor Cores

  std::string key() const;
};

// The heuristic's choice per distinct GemmDesc, asked once: cublasLtMatmulAlgoGetHeuristic costs
// tens of microseconds, as much as a small product.
class GemmAlgorithmCache {
 public:
  const cublasLtMatmulHeuristicResult_t* find(const std::string& key);
  void put(const std::string& key, const cublasLtMatmulHeuristicResult_t& result);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, cublasLtMatmulHeuristicResult_t> results_;
};

// Descriptors and algorithm of one GemmDesc, made once per plan and enqueued every run.
// cuBLASLt found no algorithm for a product: its epilogues cover fewer types and shapes than
// plain products, so a caller may retry without one.
class NoGemmAlgorithm : public Error {
 public:
  using Error::Error;
};

class GemmPlan {
 public:
  // Throws NoGemmAlgorithm when cuBLASLt has no algorithm for the description (the message says which).
  GemmPlan(const GemmDesc& desc, cublasLtHandle_t lt, GemmAlgorithmCache& cache);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  size_t workspace_bytes() const { return algorithm_.workspaceSize; }
  // bias: read for kBias/kReluBias, written for the gradient epilogues, unused otherwise.
  void enqueue(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d,
               void* bias, void* workspace) const;

  // The workspace the heuristic may use: 32 MiB lets Hopper pick its fastest kernels.
  static constexpr size_t kMaxWorkspace = size_t{32} << 20;

 private:
  void release();

  GemmDesc desc_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;  // c_ describes C and D
  cublasLtMatmulHeuristicResult_t algorithm_{};
};

}  // namespace amp::cuda
