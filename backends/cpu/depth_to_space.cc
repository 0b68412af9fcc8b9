// DepthToSpace and SpaceToDepth: a [N, C, H, W] tensor seen as six dims and transposed, as ONNX
// defines them. DepthToSpace (mode DCR): [N, b, b, C/b², H, W] permuted (0, 3, 4, 1, 5, 2); mode
// CRD: [N, C/b², b, b, H, W] permuted (0, 1, 4, 2, 5, 3); both then read as [N, C/b², H·b, W·b].
// SpaceToDepth: [N, C, H/b, b, W/b, b] permuted (0, 3, 5, 1, 2, 4) into [N, C·b², H/b, W/b].
// It moves bytes, so it takes every element type.
#include <array>
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// out = transpose(in seen as `dims`, perm): rows of the last output dim, element by element.
void permute6(const View& in, const std::array<int64_t, 6>& dims, const std::array<int, 6>& perm, View& out, int threads) {
  std::array<int64_t, 6> in_strides{}, odims{}, ostrides{};
  int64_t s = 1;
  for (int d = 5; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = s;
    s *= dims[static_cast<size_t>(d)];
  }
  for (size_t d = 0; d < 6; ++d) {
    odims[d] = dims[static_cast<size_t>(perm[d])];
    ostrides[d] = in_strides[static_cast<size_t>(perm[d])];
  }
  const int64_t inner = odims[5], step = ostrides[5], rows = out.numel() / std::max<int64_t>(inner, 1);
  const size_t esize = dtype_size(in.dtype);
  const auto* src = static_cast<const uint8_t*>(in.data);
  auto* dst = static_cast<uint8_t*>(out.data);
  parallel_for(rows, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t rest = r, from = 0;
      for (size_t d = 5; d-- > 0;) {
        from += rest % odims[d] * ostrides[d];
        rest /= odims[d];
      }
      uint8_t* row = dst + static_cast<size_t>(r * inner) * esize;
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(row + static_cast<size_t>(i) * esize, src + static_cast<size_t>(from + i * step) * esize, esize);
    }
  });
}

int64_t blocksize_of(const Node& n) {
  const int64_t b = n.attr_int("blocksize", 0);
  if (b <= 0) throw InputError(n.op_type() + " needs a positive blocksize, got " + std::to_string(b));
  return b;
}

class DepthToSpace final : public Kernel {
 public:
  DepthToSpace(const Node& n, int64_t) : b_(blocksize_of(n)), crd_(n.attr_string("mode", "DCR") == "CRD") {
    const std::string mode = n.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") throw InputError("DepthToSpace mode '" + mode + "' is not DCR or CRD");
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const int64_t n = x.dims[0], c = x.dims[1] / (b_ * b_), h = x.dims[2], w = x.dims[3];
    if (crd_)
      permute6(x, {n, c, b_, b_, h, w}, {0, 1, 4, 2, 5, 3}, io.output(0), ctx.threads);
    else
      permute6(x, {n, b_, b_, c, h, w}, {0, 3, 4, 1, 5, 2}, io.output(0), ctx.threads);
  }

 private:
  int64_t b_;
  bool crd_;
};

class SpaceToDepth final : public Kernel {
 public:
  SpaceToDepth(const Node& n, int64_t) : b_(blocksize_of(n)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2] / b_, w = x.dims[3] / b_;
    permute6(x, {n, c, h, b_, w, b_}, {0, 3, 5, 1, 2, 4}, io.output(0), ctx.threads);
  }

 private:
  int64_t b_;
};

}  // namespace

const std::vector<OpEntry>& depth_to_space_ops() {
  static const std::vector<OpEntry> ops = {{"DepthToSpace", make_kernel<DepthToSpace>, AllTypes::mask(), {}},
                                           {"SpaceToDepth", make_kernel<SpaceToDepth>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
