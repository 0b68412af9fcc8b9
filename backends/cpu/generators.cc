// Ops that make tensors rather than transform them: Constant, ConstantOfShape, Range, OneHot. Their
// outputs usually feed shapes, so the executor computes them once per plan.
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Constant final : public Kernel {
 public:
  Constant(const Node& n, int64_t) {
    if (const Attribute* a = n.attr("value")) {
      value_ = a->t;
    } else if (const Attribute* f = n.attr("value_float")) {
      value_ = scalar(DType::kFloat, &f->f, {});
    } else if (const Attribute* fs = n.attr("value_floats")) {
      value_ = scalar(DType::kFloat, fs->floats.data(), {static_cast<int64_t>(fs->floats.size())});
    } else if (const Attribute* i = n.attr("value_int")) {
      value_ = scalar(DType::kInt64, &i->i, {});
    } else if (const Attribute* is = n.attr("value_ints")) {
      value_ = scalar(DType::kInt64, is->ints.data(), {static_cast<int64_t>(is->ints.size())});
    } else {
      throw InputError("Constant has no value attribute this backend reads (value, value_float(s), value_int(s))");
    }
    if (value_.dtype == DType::kString || dtype_size(value_.dtype) == 0)
      throw InputError("Constant of type " + std::string(dtype_name(value_.dtype)) + " is not supported");
  }
  void run(KernelIO& io, const RunContext&) const override {
    if (value_.nbytes()) std::memcpy(io.output(0).data, value_.data(), value_.nbytes());
  }

 private:
  static Tensor scalar(DType t, const void* data, std::vector<int64_t> dims) {
    Tensor out(t, std::move(dims));
    if (out.nbytes()) std::memcpy(out.mutable_data(), data, out.nbytes());
    return out;
  }
  Tensor value_;
};

class ConstantOfShape final : public Kernel {
 public:
  ConstantOfShape(const Node& n, int64_t) : value_(DType::kFloat, {1}) {
    if (const Attribute* a = n.attr("value")) {
      if (a->t.numel() != 1) throw InputError("ConstantOfShape value must have one element");
      value_ = a->t;
    }
  }
  void run(KernelIO& io, const RunContext&) const override {
    const size_t elem = dtype_size(value_.dtype);
    auto* out = static_cast<uint8_t*>(io.output(0).data);
    for (int64_t i = 0; i < io.output(0).numel(); ++i) std::memcpy(out + i * elem, value_.data(), elem);
  }

 private:
  Tensor value_;
};

class Range final : public Kernel {
 public:
  Range(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext&) const override {
    const int64_t n = count(io);
    dispatch(kTypes, io.input(0).dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T start = io.input(0).as<T>()[0], delta = io.input(2).as<T>()[0];
      T* out = io.output(0).as<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    });
  }
  static constexpr TypeList<float, double, int16_t, int32_t, int64_t> kTypes{};

 private:
  static int64_t count(const KernelIO& io) {
    int64_t n = 0;
    dispatch(kTypes, io.input(0).dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const double start = static_cast<double>(io.input(0).as<T>()[0]);
      const double limit = static_cast<double>(io.input(1).as<T>()[0]);
      const double delta = static_cast<double>(io.input(2).as<T>()[0]);
      if (delta == 0) throw InputError("Range delta must not be 0");
      n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    });
    return n;
  }
};

// OneHot(indices, depth, values = [off, on]): `on` where an index (negative ones count from the
// end, as ONNX says from opset 11) names the position along the new axis, `off` elsewhere; an
// index outside [-depth, depth) gives a row of `off`.
class OneHot final : public Kernel {
 public:
  OneHot(const Node& n, int64_t) : axis_(n.attr_int("axis", -1)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& indices = io.input(0);
    const View& values = io.input(2);
    View& y = io.output(0);
    if (values.numel() != 2) throw InputError("OneHot's values must have two elements [off, on]");
    const int64_t rank = static_cast<int64_t>(y.rank());
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, rank));
    const int64_t depth = y.dims[axis], outer = product(y.dims, 0, axis), inner = product(y.dims, axis + 1);
    const size_t elem = dtype_size(y.dtype);
    const auto* off = static_cast<const uint8_t*>(values.data);
    const uint8_t* on = off + elem;
    auto* out = static_cast<uint8_t*>(y.data);
    for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(out + i * elem, off, elem);
    dispatch(NumericTypes{}, indices.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* idx = indices.as<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = static_cast<int64_t>(load(idx[o * inner + i]));  // floats truncate, as ONNX Runtime casts
          if (k < 0) k += depth;
          if (k >= 0 && k < depth) std::memcpy(out + ((o * depth + k) * inner + i) * elem, on, elem);
        }
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

const std::vector<OpEntry>& generator_ops() {
  static const std::vector<OpEntry> ops = {
      {"Constant", make_kernel<Constant>, 0, {}},
      {"ConstantOfShape", make_kernel<ConstantOfShape>, TypeList<int64_t>::mask(), {}},
      {"Range", make_kernel<Range>, decltype(Range::kTypes)::mask(), {}},
      {"OneHot", make_kernel<OneHot>, NumericTypes::mask(), {}},
  };
  return ops;
}

}  // namespace amp::cpu
