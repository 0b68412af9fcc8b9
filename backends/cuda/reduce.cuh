// Reductions (sum, mean, max, min, product, and the norm-like sums: L1, L2, sum of squares, log of
// the sum) over any set of axes of a float tensor, accumulated in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/dtype.h"

namespace amp::cuda {

// kL1, kSumSquare, kL2 and kLogSum are sums of |x| or x^2 read from the input, the last two finished
// by a square root or a logarithm on the output.
enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kSumSquare, kL2, kLogSum };

// The passes of one reduction, planned once per shape: dims with the same kept/reduced status are
// merged; each run of reduced dims is one [outer, r, inner] pass (innermost first); a long r over
// few outputs is split across blocks into fp32 partials and finished by a second pass.
class ReducePlan {
 public:
  ReducePlan(DType t, const std::vector<int64_t>& dims, const std::vector<bool>& reduced, ReduceKind kind, int sm_count);
  size_t workspace_bytes() const { return workspace_floats_ * sizeof(float); }
  void enqueue(const void* in, void* out, void* workspace, cudaStream_t stream) const;

 private:
  struct Pass {
    int64_t outer, r, inner;
    int chunks;  // blocks along r, each writing its own partials
    bool from_input, to_output;
    size_t src_offset, dst_offset;  // in floats, into the workspace, when not the input / output
  };
  DType type_;
  ReduceKind kind_;
  int64_t total_ = 0;  // elements reduced into each output: mean divides by it
  int64_t count_ = 0;  // output elements
  std::vector<Pass> passes_;
  size_t workspace_floats_ = 0;
};

}  // namespace amp::cuda
