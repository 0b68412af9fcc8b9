#include "backends/cuda/copy_fusion.h"

namespace amp::cuda {

std::unique_ptr<PreparedOp> prepare_copies(std::vector<OperandCopy> copies) {
  std::vector<StridedCopy> walks;
  for (const OperandCopy& c : copies) walks.push_back(c.copy);
  return std::make_unique<PreparedFunction>([copies = std::move(copies), walks](const OpBuffers& b,
                                                                                DeviceContext& ctx) {
    std::vector<const void*> src;
    std::vector<void*> dst;
    for (const OperandCopy& c : copies) {
      src.push_back(b.in[c.input]);
      dst.push_back(b.out[c.output]);
    }
    strided_copies(walks, src, dst, ctx.sm_count(), ctx.stream());
  });
}

}  // namespace amp::cuda
