// The random generators: RandomUniform and RandomNormal (a shape from their attribute),
// RandomUniformLike and RandomNormalLike (the input's shape, its type unless dtype says another)
// and Bernoulli (1 with the input's probability per element, 0 otherwise). Each element is a
// counter-based hash of (the run's seed for the node, the node's own seed attribute, the element),
// as Dropout draws: reproducible for a given CompileOptions::seed, new on every run, the same with
// any number of threads. ONNX Runtime draws from another generator, so no element equals its own;
// what the two share is the distribution. Uniform draws are 53-bit doubles in [0, 1) scaled to
// [low, high); normal ones come from two uniforms by Box-Muller. Values are computed in double and
// rounded once to the output type (float16, float, double; bfloat16 too here).
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// A uniform double in [0, 1) for element i of the stream.
inline double uniform(uint64_t stream, uint64_t i) {
  return static_cast<double>(mix64(stream + mix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

enum class Draw { kUniform, kNormal, kBernoulli };

using Floats = TypeList<float, f16, bf16, double>;

class Random final : public Kernel {
 public:
  Random(const Node& n, Draw draw, bool like)
      : draw_(draw),
        like_(like),
        dtype_(static_cast<DType>(n.attr_int("dtype", like || draw == Draw::kBernoulli ? 0 : 1))),
        a_(draw == Draw::kNormal ? n.attr_float("mean", 0.0f) : n.attr_float("low", 0.0f)),
        b_(draw == Draw::kNormal ? n.attr_float("scale", 1.0f) : n.attr_float("high", 1.0f)),
        shape_(n.attr_ints("shape")) {
    if (const Attribute* s = n.attr("seed")) {
      uint32_t bits = 0;
      std::memcpy(&bits, &s->f, sizeof bits);
      seed_ = mix64(0x5eedull ^ bits);
      seeded_ = true;
    }
    if (!like && draw != Draw::kBernoulli && !n.attr("shape")) throw InputError(n.op_type() + " needs its 'shape' attribute");
    for (int64_t d : shape_)
      if (d < 0) throw InputError(n.op_type() + "'s shape has a negative dim");
  }

  bool draws() const override { return true; }

  size_t infer(KernelIO& io) const override {
    View& y = io.output(0);
    const bool from_input = like_ || draw_ == Draw::kBernoulli;
    y.dtype = dtype_ != DType::kUndefined ? dtype_ : io.input(0).dtype;
    y.dims = from_input ? io.input(0).dims : shape_;
    const bool is_float = y.dtype == DType::kFloat || y.dtype == DType::kFloat16 || y.dtype == DType::kBFloat16 ||
                          y.dtype == DType::kDouble;
    if (!is_float && draw_ != Draw::kBernoulli)
      throw InputError("random values of type " + std::string(dtype_name(y.dtype)) + " are not supported (float types are)");
    return 0;
  }

  void run(KernelIO& io, const RunContext& ctx) const override {
    View& y = io.output(0);
    const uint64_t stream = mix64(ctx.seed ^ (seeded_ ? seed_ : 0x9e3779b97f4a7c15ull));
    const int64_t n = y.numel();
    if (draw_ == Draw::kBernoulli) {
      std::vector<double> p(static_cast<size_t>(n));
      dispatch(Floats{}, io.input(0).dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = io.input(0).as<T>();
        for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<double>(load(x[i]));
      });
      write(y, ctx, [&](int64_t i) { return uniform(stream, static_cast<uint64_t>(i)) < p[static_cast<size_t>(i)] ? 1.0 : 0.0; });
      return;
    }
    if (draw_ == Draw::kUniform) {
      write(y, ctx, [&](int64_t i) { return a_ + (b_ - a_) * uniform(stream, static_cast<uint64_t>(i)); });
      return;
    }
    write(y, ctx, [&](int64_t i) {
      // Box-Muller on a pair of draws per element; 1 - u keeps the logarithm's argument in (0, 1].
      const double u1 = 1.0 - uniform(stream, 2 * static_cast<uint64_t>(i));
      const double u2 = uniform(stream, 2 * static_cast<uint64_t>(i) + 1);
      return a_ + b_ * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    });
  }

 private:
  template <class F>
  static void write(View& y, const RunContext& ctx, F&& value) {
    dispatch(AllTypes{}, y.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* out = y.as<T>();
      parallel_for(y.numel(), ctx.threads, 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = convert<T>(value(i));
      });
    });
  }

  Draw draw_;
  bool like_;
  DType dtype_;
  double a_, b_;
  std::vector<int64_t> shape_;
  uint64_t seed_ = 0;
  bool seeded_ = false;
};

template <Draw D, bool Like>
std::unique_ptr<Kernel> make_random(const Node& n, int64_t) {
  return std::make_unique<Random>(n, D, Like);
}

}  // namespace

const std::vector<OpEntry>& random_ops() {
  static const std::vector<OpEntry> ops = {
      {"RandomUniform", make_random<Draw::kUniform, false>, 0, {}},
      {"RandomNormal", make_random<Draw::kNormal, false>, 0, {}},
      {"RandomUniformLike", make_random<Draw::kUniform, true>, AllTypes::mask(), {}, false},
      {"RandomNormalLike", make_random<Draw::kNormal, true>, AllTypes::mask(), {}, false},
      {"Bernoulli", make_random<Draw::kBernoulli, false>, Floats::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
