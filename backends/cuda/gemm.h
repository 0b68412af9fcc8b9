// Matrix products through cuBLASLt. fp16/bf16 operands multiply on Tensor Cores with fp32
// accumulation (CUBLAS_COMPUTE_32F: 16-bit products summed in fp32, so a K=4096 dot product does
// not lose the small terms); fp32 operands use TF32 Tensor Cores only when allowed (10-bit
// mantissa: 495 vs 67 TFLOP/s on H100, a numerics change the user opts into).
//
// Work that would otherwise be a separate pass over the output happens in the epilogue:
// + bias (and ReLU) on the forward product, the bias gradient (a column sum of dY) on the weight
// gradient product. cuBLASLt is column-major; a row-major D = op(A) op(B) is computed as the
// column-major D^T = op(B)^T op(A)^T, which is the same bytes with A and B swapped.
//
// Training pairs a forward epilogue that writes an aux matrix with a backward one that reads it
// (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_*): the forward's ReLU writes where it let the
// value through as a bitmask, which the backward's DRELU applies to dY W^T; the forward's GELU
// writes its input, from which DGELU takes gelu'. The aux matrix has D's shape: after the swap,
// row r of a row-major [rows, n] D is column r of cuBLASLt's D^T, so each row is `aux_ld`
// elements (bits for ReLU) of which the first n hold it, and a batch's rows follow the previous
// batch's (batch stride aux_ld * m): batched and folded rows lay it out alike. The backward
// bias-gradient epilogues sum their own D's columns, the bias gradient of the layer whose forward
// wrote the aux matrix.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/device_report.h"
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
  // With an aux matrix (the enqueue's `aux`, gemm_aux_bytes of it):
  kReluAuxBias,    // D = relu(D + bias[n]); aux bit set where D + bias > 0 (written)
  kDRelu,          // D = D where the aux bit is set, else 0 (aux read)
  kDReluBiasGrad,  // kDRelu, and bias_grad[n] = column sums of that D
  kGeluBias,       // D = gelu(D + bias[n]), GELU's tanh form
  kGeluAuxBias,    // kGeluBias; aux = D + bias in D's type (written)
  kDGelu,          // D = D * gelu'(aux) (aux read)
  kDGeluBiasGrad,  // kDGelu, and bias_grad[n] = column sums of that D
};

// cuBLASLt's name of the epilogue ("RELU_AUX_BIAS"), "none" for kNone.
const char* gemm_epilogue_name(GemmEpilogue e);

// Whether the epilogue writes or reads an aux matrix, and its row length for a row-major D of n
// columns: the ReLU bitmask's in bits, a multiple of 128 (16-byte rows); GELU's input in
// elements, a multiple of 8 (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD). 0 without aux.
int64_t gemm_aux_ld(GemmEpilogue e, int64_t n);
// Bytes of the aux matrix of `rows` rows (every batch's rows together) of a D of d_type.
size_t gemm_aux_bytes(GemmEpilogue e, DType d_type, int64_t rows, int64_t n);

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
  // A, B or D is stored as the padded product reads or writes it (gemm_padding.h): its rows (of k
  // elements for A, m when transposed; of n for B, k when transposed; of n for D) as many elements
  // apart as the padded product's, zeros between (row_pitch.h). The product then reads or writes
  // it where it is, without staging it.
  bool a_stored_padded = false, b_stored_padded = false, d_stored_padded = false;

  std::string key() const;
  std::string str() const;  // "float16 [64x256]x[256x1024] batch 1 with RELU_AUX_BIAS", for messages
};

// The heuristic's results per distinct GemmDesc, asked once (cublasLtMatmulAlgoGetHeuristic costs
// tens of microseconds, as much as a small product), and which of them ran: a later plan of the
// same description starts with the one that worked.
class GemmAlgorithmCache {
 public:
  struct Entry {
    std::vector<cublasLtMatmulHeuristicResult_t> results;  // usable ones, best first
    size_t working = 0;                                    // the one that ran last
  };
  std::optional<Entry> find(const std::string& key);
  void put(const std::string& key, Entry entry);
  void set_working(const std::string& key, size_t index);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

// cuBLASLt found no algorithm for a product: its epilogues cover fewer types and shapes than
// plain products, so a caller may retry without one.
class NoGemmAlgorithm : public Error {
 public:
  using Error::Error;
};

class GemmPadding;

// Descriptors and algorithms of one GemmDesc, made once per plan and enqueued every run. A product
// whose leading dimensions cuBLASLt's fast kernels cannot take runs on padded copies
// (gemm_padding.h), staged in its workspace.
class GemmPlan {
 public:
  // Throws NoGemmAlgorithm when cuBLASLt has no algorithm for the description (the message says
  // which). report, when given, records the products that ran with another algorithm than the
  // heuristic's first.
  GemmPlan(const GemmDesc& desc, cublasLtHandle_t lt, GemmAlgorithmCache& cache, DeviceReport* report = nullptr);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // Enough for any of the algorithms enqueue may fall back to, and the padded copies.
  size_t workspace_bytes() const;
  size_t algorithm_count() const { return algorithms_.size(); }

  // For timing the algorithms (gemm_tuning.h). The bytes of the operands of the product cuBLASLt
  // runs (padded sizes): A, B, D (and C), the bias vector (0 without), the aux matrix (0 without),
  // and the largest workspace of the algorithms.
  struct OperandBytes {
    size_t a = 0, b = 0, d = 0, bias = 0, aux = 0, workspace = 0;
  };
  OperandBytes operand_bytes() const;
  // Enqueues the product as cuBLASLt runs it, with algorithm i, on operands of operand_bytes()
  // (aux 256-byte aligned); cuBLASLt's status, nothing falls back.
  cublasStatus_t run_algorithm(size_t i, cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, void* d,
                               void* bias, void* aux, void* workspace) const;
  // Enqueue starts with algorithm i from now on (and so do later plans of the same description).
  void prefer(size_t i);
  size_t preferred() const { return current_.load(); }
  // The description's key in the algorithm cache (the padded product's).
  const std::string& key() const { return key_; }
  const GemmDesc& desc() const { return desc_; }
  // bias: read for the epilogues that add it, written for the gradient epilogues; aux: written
  // or read by the epilogues that have one (256-byte aligned, as arena buffers are); both unused
  // otherwise. An algorithm cublasLtMatmul refuses (anything but CUBLAS_STATUS_INVALID_VALUE, the
  // status of arguments no algorithm would take) hands the product to the next the heuristic
  // ranked, from then on; the last one's refusal throws.
  void enqueue(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d,
               void* bias, void* aux, void* workspace) const;

  // The workspace the heuristic may use: 32 MiB lets Hopper pick its fastest kernels.
  static constexpr size_t kMaxWorkspace = size_t{32} << 20;
  // Results asked of the heuristic: cublasLt.h ranks them by estimated time and gives each a
  // state of its own, so the first may be one that cannot run.
  static constexpr int kHeuristicResults = 8;

 private:
  void release();
  // Byte offset of the padded copies in the workspace.
  size_t staging_at() const;
  // The bias and aux pointers the epilogue reads or writes, set in the descriptor.
  void set_epilogue_pointers(void* bias, void* aux) const;
  // One cublasLtMatmul with heuristic result r (C read from c when beta is not 0, else from d).
  cublasStatus_t matmul(const cublasLtMatmulHeuristicResult_t& r, cublasLtHandle_t lt, cudaStream_t stream, const void* a,
                        const void* b, const void* c, void* d, void* workspace) const;
  // The product on what it reads and writes after padding.
  void run(cublasLtHandle_t lt, cudaStream_t stream, const void* a, const void* b, const void* c, void* d, void* bias,
           void* aux, void* workspace) const;

  GemmDesc desc_;
  std::unique_ptr<GemmPadding> padding_;
  std::string key_;
  GemmAlgorithmCache* cache_;
  DeviceReport* report_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;  // c_ describes C and D
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms_;  // usable, best first
  mutable std::atomic<size_t> current_{0};                   // the one enqueue runs
};

}  // namespace amp::cuda
