// Products on oneDNN's matmul, fp32 and bf16: bf16 operands read as stored, fp32 accumulation
// (vdpbf16ps on AVX-512 BF16 / AMX CPUs), the result rounded once to bf16 — the CPU backend's
// contract, without widening both operands to fp32 first; fp32 as fp32 (oneDNN's brgemm kernels
// beat OpenBLAS on the small products of attention and narrow layers: the models/ gpt's step at 1
// thread 22 -> 18.5 ms). Row-major operands, no reorders: Y[b] = A[b] @ B[b] with
// A [batch, M, K] (or one [M, K] for every batch) and B [batch, K, N] (or one [K, N]).
// Where oneDNN has no optimised implementation (a CPU without AVX-512), ok() is false and the
// kernel keeps its widening path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace amp::cpu {

struct MatMulGeometry {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool shared_a = false, shared_b = false;  // one matrix for every batch
};

class DnnlMatMul {
 public:
  // bf16 operands and result, or with fp32 set fp32 ones.
  DnnlMatMul(const MatMulGeometry& g, int threads, bool fp32);
  ~DnnlMatMul();
  bool ok() const { return impl_ != nullptr; }
  size_t scratch_bytes() const;
  void run(const void* a, const void* b, void* y, void* scratch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace amp::cpu
