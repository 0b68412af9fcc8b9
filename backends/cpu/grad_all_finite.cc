// AllFinite: one bool for all of a step's gradients — false when any element of any input is inf
// or NaN. AllFiniteScaled(scale, inputs...): the same for every x * scale, the product rounded to
// float32 as the unscaling Mul rounds it, so it reads the gradients before they are unscaled. The
// loss-scaled step reads the flag to skip the update and back the scale off, so the check never
// leaves the graph (no host round trip per tensor).
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// Exponent bits all ones: inf or NaN. Integer tests on the stored bits, so the loops vectorize.
template <class T>
int any_non_finite(const T* p, int64_t n) {
  int found = 0;
  if constexpr (std::is_same_v<T, float>) {
    const auto* u = reinterpret_cast<const uint32_t*>(p);
    for (int64_t k = 0; k < n; ++k) found |= (u[k] & 0x7f800000u) == 0x7f800000u;
  } else if constexpr (std::is_same_v<T, double>) {
    const auto* u = reinterpret_cast<const uint64_t*>(p);
    for (int64_t k = 0; k < n; ++k) found |= (u[k] & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
  } else {
    const uint16_t mask = std::is_same_v<T, f16> ? 0x7c00 : 0x7f80;
    const auto* u = reinterpret_cast<const uint16_t*>(p);
    for (int64_t k = 0; k < n; ++k) found |= (u[k] & mask) == mask;
  }
  return found;
}

// The same for every x * scale, the product rounded to float32 as the unscaling Mul rounds it
// (exact widening for fp16/bf16; fp32 as it is).
template <class T>
int any_non_finite_scaled(const T* p, int64_t n, float scale) {
  int found = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float y = static_cast<float>(load(p[k])) * scale;
    uint32_t u;
    std::memcpy(&u, &y, sizeof u);
    found |= (u & 0x7f800000u) == 0x7f800000u;
  }
  return found;
}

class AllFinite final : public Kernel {
 public:
  AllFinite(const Node& n, int64_t) : scaled_(n.op_type() == "AllFiniteScaled") {}
  size_t infer(KernelIO& io) const override {
    const size_t first = scaled_ ? 1 : 0;
    if (scaled_ && (!io.has_in(0) || io.input(0).dtype != DType::kFloat || io.input(0).numel() != 1))
      throw InputError("AllFiniteScaled's scale must be a float32 scalar");
    for (size_t i = first; i < io.in.size(); ++i)
      if (io.has_in(i) && !is_floating(io.input(i).dtype)) throw InputError(name() + " takes floating-point tensors");
    io.output(0).dtype = DType::kBool;
    io.output(0).dims = {};
    return 0;
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const size_t first = scaled_ ? 1 : 0;
    const float scale = scaled_ ? *io.input(0).as<float>() : 1.0f;
    bool finite = true;
    for (size_t i = first; i < io.in.size() && finite; ++i) {
      if (!io.has_in(i)) continue;
      const View& v = io.input(i);
      dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = v.as<T>();
        int bad = 0;
        parallel_for(v.numel(), ctx.threads, kParallelGrain, [&](int64_t b, int64_t e) {
          const int found = scaled_ ? any_non_finite_scaled(p + b, e - b, scale) : any_non_finite(p + b, e - b);
          if (found) {
#pragma omp atomic write
            bad = 1;
          }
        });
        finite = !bad;
      });
    }
    *io.output(0).as<bool>() = finite;
  }

 private:
  std::string name() const { return scaled_ ? "AllFiniteScaled" : "AllFinite"; }
  bool scaled_;
};

}  // namespace

const std::vector<OpEntry>& grad_all_finite_ops() {
  static const std::vector<OpEntry> ops = {
      {"AllFinite", make_kernel<AllFinite>, FloatTypes::mask(), {}},
      {"AllFiniteScaled", make_kernel<AllFinite>, FloatTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
