// Cast as a device op (cast.cuh) for the Casts no generated kernel can run (is_fusable_node: those
// between float, float16, bfloat16 and bool fuse); a Cast to its own type is its input's bytes.
// CastLike is the same op: its output type, its second input's, is known when it is prepared.
#include <string>

#include "backends/cuda/cast.cuh"
#include "backends/cuda/cuda_op.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

class Cast final : public CudaOp {
 public:
  Cast(const Node&, int64_t) {}
  std::unique_ptr<PreparedOp> prepare(const OpShapes& s, DeviceContext&) const override {
    const DType from = s.in.at(0)->dtype, to = s.out.at(0)->dtype;
    if (!cast_supported(from, to))
      throw InputError("Cast from " + std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                       " does not run on the device");
    int64_t n = 1;
    for (int64_t d : s.in[0]->dims) n *= d;
    return std::make_unique<PreparedFunction>([=](const OpBuffers& b, DeviceContext& ctx) {
      cast(from, to, n, b.in[0], b.out[0], ctx.sm_count(), ctx.stream());
    });
  }
  bool aliases_input(const OpShapes& s) const override { return s.in.at(0)->dtype == s.out.at(0)->dtype; }
};

}  // namespace

const std::vector<CudaOpEntry>& cast_ops() {
  static const std::vector<CudaOpEntry> ops = {{"", "Cast", make_op<Cast>}, {"", "CastLike", make_op<Cast>}};
  return ops;
}

}  // namespace amp::cuda
