// Pad (constant, reflect, edge and wrap; negative amounts crop) on any element type: each output
// row of the last axis reads one input row (or is the constant), its elements by graph/ops/pad.h's
// pad_source. The constant is input 2 (opset 11 on; absent: 0) or the value attribute before.
#include <cstring>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/pad.h"

namespace amp::cpu {
namespace {

class Pad final : public Kernel {
 public:
  Pad(const Node& n, int64_t opset)
      : attrs_(opset < 11), mode_(pad_mode(n)), pads_attr_(n.attr_ints("pads")), value_attr_(n.attr_float("value", 0.0f)) {}

  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    View& y = io.output(0);
    std::vector<int64_t> pads = pads_attr_, axes;
    if (!attrs_) {
      pads = read_ints(io.input(1));
      if (io.has_in(3)) axes = read_ints(io.input(3));
    }
    const PadAmounts p = pad_amounts(pads, axes, x.rank());
    if (y.numel() == 0) return;
    dispatch(AllTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T fill = convert<T>(value_attr_);
      if (!attrs_) {
        fill = convert<T>(0.0f);
        if (io.has_in(2) && io.input(2).numel() > 0) {
          if (io.input(2).dtype != x.dtype)
            throw InputError("Pad constant_value is " + std::string(dtype_name(io.input(2).dtype)) + " but the data is " +
                             std::string(dtype_name(x.dtype)));
          fill = io.input(2).as<T>()[0];
        }
      }
      pad<T>(x, y, p, fill, ctx.threads);
    });
  }

 private:
  template <class T>
  void pad(const View& x, View& y, const PadAmounts& p, T fill, int threads) const {
    const size_t rank = x.rank();
    const T* src = x.as<T>();
    T* dst = y.as<T>();
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    const std::vector<int64_t> in_strides = strides_of(x.dims);
    const int64_t inner = y.dims.back(), in_inner = x.dims.back(), begin = p.begin.back();
    // The input index of every output column, once.
    std::vector<int64_t> column(static_cast<size_t>(inner));
    for (int64_t o = 0; o < inner; ++o) column[static_cast<size_t>(o)] = pad_source(o, in_inner, begin, mode_);
    const int64_t rows = y.numel() / inner;
    parallel_for(rows, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, inner)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* row = dst + r * inner;
        int64_t off = 0, rest = r;
        bool constant = false;
        for (size_t d = rank - 1; d-- > 0;) {
          const int64_t o = rest % y.dims[d];
          rest /= y.dims[d];
          const int64_t i = pad_source(o, x.dims[d], p.begin[d], mode_);
          if (i < 0) {
            constant = true;
            break;
          }
          off += i * in_strides[d];
        }
        if (constant) {
          std::fill(row, row + inner, fill);
          continue;
        }
        const T* in_row = src + off;
        for (int64_t o = 0; o < inner; ++o) {
          const int64_t i = column[static_cast<size_t>(o)];
          row[o] = i < 0 ? fill : in_row[i];
        }
      }
    });
  }

  bool attrs_;
  PadMode mode_;
  std::vector<int64_t> pads_attr_;
  float value_attr_;
};

// ai.onnx_amp PadGrad(dY, pads, shape[, axes]): the gradient of a reflect, edge or wrap Pad of a
// tensor of that shape. Every dY element adds into the input element pad_source says it read; the
// sums run in fp64 in output order, so the result does not depend on the number of cores.
class PadGrad final : public Kernel {
 public:
  PadGrad(const Node& n, int64_t) : mode_(pad_mode(n)) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> data = read_ints(io.input(2));
    const PadAmounts p = amounts(io, data.size());
    if (io.input(0).dims != padded_dims(data, p, mode_))
      throw InputError("PadGrad dY " + dims_str(io.input(0).dims) + " is not the padded shape of " + dims_str(data));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = data;
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& dy = io.input(0);
    View& dx = io.output(0);
    const std::vector<int64_t>& data = dx.dims;
    const PadAmounts p = amounts(io, data.size());
    const std::vector<int64_t> strides = strides_of(data);
    std::vector<double> acc(static_cast<size_t>(dx.numel()), 0.0);
    dispatch(FloatTypes{}, dy.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = dy.as<T>();
      for (int64_t i = 0; i < dy.numel(); ++i) {
        int64_t at = 0, rest = i;
        bool read = true;
        for (size_t a = data.size(); a-- > 0;) {
          const int64_t o = rest % dy.dims[a];
          rest /= dy.dims[a];
          const int64_t src = pad_source(o, data[a], p.begin[a], mode_);
          if (src < 0) read = false;
          at += src * strides[a];
        }
        if (read) acc[static_cast<size_t>(at)] += static_cast<double>(load(g[i]));
      }
      T* out = dx.as<T>();
      for (size_t k = 0; k < acc.size(); ++k) out[k] = convert<T>(acc[k]);
    });
  }

 private:
  static PadAmounts amounts(const KernelIO& io, size_t rank) {
    return pad_amounts(read_ints(io.input(1)), io.has_in(3) ? read_ints(io.input(3)) : std::vector<int64_t>{}, rank);
  }
  PadMode mode_;
};

}  // namespace

const std::vector<OpEntry>& grad_pad_ops() {
  static const std::vector<OpEntry> ops = {{"PadGrad", make_kernel<PadGrad>, FloatTypes::mask(), {1, 2, 3}}};
  return ops;
}

const std::vector<OpEntry>& pad_ops() {
  static const std::vector<OpEntry> ops = {{"Pad", make_kernel<Pad>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
