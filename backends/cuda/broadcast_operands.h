// Operands broadcast to an output (ONNX's multidirectional rule) as a kernel walks them: the
// output's dims and, per operand, its element stride along each (0 where it broadcasts). For the
// hand-written elementwise kernels of ops the generated ones cannot run (mean.cu, bit_shift.cu).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.h"

namespace amp::cuda {

constexpr int kMaxBroadcastRank = 8;
constexpr int kMaxBroadcastOperands = 8;

struct BroadcastOperands {
  int rank = 0, operands = 0;
  int64_t dims[kMaxBroadcastRank] = {};                              // the output's
  int64_t strides[kMaxBroadcastOperands][kMaxBroadcastRank] = {};  // per operand
  int64_t numel = 1;
};

// InputError naming `op` for dims that do not broadcast to `out` or beyond the limits above.
inline BroadcastOperands broadcast_operands(const char* op, const std::vector<int64_t>& out,
                                            const std::vector<std::vector<int64_t>>& in) {
  if (out.size() > static_cast<size_t>(kMaxBroadcastRank) || in.size() > static_cast<size_t>(kMaxBroadcastOperands))
    throw InputError(std::string(op) + " of rank " + std::to_string(out.size()) + " over " + std::to_string(in.size()) +
                     " operands is not supported on the GPU (at most rank " + std::to_string(kMaxBroadcastRank) +
                     " and " + std::to_string(kMaxBroadcastOperands) + " operands)");
  BroadcastOperands b;
  b.rank = static_cast<int>(out.size());
  b.operands = static_cast<int>(in.size());
  for (size_t d = 0; d < out.size(); ++d) {
    b.dims[d] = out[d];
    b.numel *= out[d];
  }
  for (size_t k = 0; k < in.size(); ++k) {
    const std::vector<int64_t>& dims = in[k];
    if (dims.size() > out.size()) throw InputError(std::string(op) + ": an operand has more dims than the output");
    int64_t stride = 1;
    for (size_t j = dims.size(); j-- > 0;) {
      const size_t d = j + out.size() - dims.size();
      if (dims[j] != out[d] && dims[j] != 1)
        throw InputError(std::string(op) + ": operand " + std::to_string(k) + " does not broadcast to the output");
      b.strides[k][d] = dims[j] == 1 ? 0 : stride;
      stride *= dims[j];
    }
  }
  return b;
}

}  // namespace amp::cuda
