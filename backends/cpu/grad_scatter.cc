// The gradient ops that scatter dY back into a larger zero tensor: GatherGrad (scatter-add along
// an axis; repeated indices accumulate), SliceGrad (dY placed where Slice read it) and SumToShape
// (the sum over the axes a smaller shape was broadcast along). Sums run in fp64 in a fixed order,
// so the result does not depend on the number of cores.
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

std::vector<int64_t> shape_input(const View& v) {
  if (v.rank() != 1) throw InputError("a shape input must be 1-D, got " + dims_str(v.dims));
  std::vector<int64_t> dims = read_ints(v);
  for (int64_t d : dims)
    if (d < 0) throw InputError("a shape input has a negative dim: " + dims_str(dims));
  return dims;
}

// Writes an fp64 accumulator into the output's type.
void store_all(const std::vector<double>& acc, View& out) {
  dispatch(FloatTypes{}, out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.as<T>();
    for (size_t i = 0; i < acc.size(); ++i) p[i] = convert<T>(acc[i]);
  });
}

template <class F>
void for_each_element(const View& v, F&& f) {
  dispatch(FloatTypes{}, v.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = v.as<T>();
    for (int64_t i = 0; i < v.numel(); ++i) f(i, static_cast<double>(load(p[i])));
  });
}

class GatherGrad final : public Kernel {
 public:
  GatherGrad(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> data = shape_input(io.input(1));
    const int64_t axis = normalize_axis(axis_, static_cast<int64_t>(data.size()));
    std::vector<int64_t> expect(data.begin(), data.begin() + axis);
    const auto& idx = io.input(2).dims;
    expect.insert(expect.end(), idx.begin(), idx.end());
    expect.insert(expect.end(), data.begin() + axis + 1, data.end());
    if (io.input(0).dims != expect) throw InputError("GatherGrad dY " + dims_str(io.input(0).dims) + " should be " + dims_str(expect));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = data;
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const std::vector<int64_t> data = shape_input(io.input(1));
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(data.size())));
    const int64_t extent = data[axis], inner = product(data, axis + 1);
    const std::vector<int64_t> indices = read_ints(io.input(2));
    const int64_t count = static_cast<int64_t>(indices.size());
    const View& dy = io.input(0);
    View& out = io.output(0);
    // Each output row sums the dY rows gathered from it, in fp64 and in dY's order (the order an
    // fp64 accumulator of the whole output would add them in), so the result is the same; rows
    // nothing was gathered from are 0. No accumulator the size of the output (an embedding
    // table's gradient would otherwise cost twice the table in fp64 every step).
    std::vector<std::vector<int64_t>> rows_of;  // per distinct target row: the positions j reading it
    std::vector<int64_t> target;                // per distinct target row: its index along the axis
    if (dy.numel() > 0) {
      std::unordered_map<int64_t, size_t> slot;
      for (int64_t j = 0; j < count; ++j) {
        int64_t at = indices[static_cast<size_t>(j)];
        if (at < 0) at += extent;
        if (at < 0 || at >= extent)
          throw InputError("index " + std::to_string(indices[static_cast<size_t>(j)]) + " is out of range for " +
                           std::to_string(extent));
        auto [it, fresh] = slot.emplace(at, rows_of.size());
        if (fresh) {
          rows_of.emplace_back();
          target.push_back(at);
        }
        rows_of[it->second].push_back(j);
      }
    }
    const int64_t outer = product(data, 0, axis);
    dispatch(FloatTypes{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = dy.as<T>();
      T* y = out.as<T>();
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = convert<T>(0.0);
      for (int64_t o = 0; o < outer; ++o)
        for (size_t r = 0; r < rows_of.size(); ++r) {
          T* to = y + (o * extent + target[r]) * inner;
          for (int64_t k = 0; k < inner; ++k) {
            double sum = 0;
            for (int64_t j : rows_of[r]) sum += static_cast<double>(load(g[(o * count + j) * inner + k]));
            to[k] = convert<T>(sum);
          }
        }
    });
  }

 private:
  int64_t axis_;
};

class SliceGrad final : public Kernel {
 public:
  SliceGrad(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> data = shape_input(io.input(1));
    std::vector<int64_t> expect;
    for (const Range& r : ranges(io, data)) expect.push_back(r.count);
    if (io.input(0).dims != expect) throw InputError("SliceGrad dY " + dims_str(io.input(0).dims) + " should be " + dims_str(expect));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = data;
    return 0;
  }
  void run(KernelIO& io, const RunContext&) const override {
    const std::vector<int64_t> data = shape_input(io.input(1));
    const std::vector<Range> r = ranges(io, data);
    const std::vector<int64_t> strides = strides_of(data);
    const std::vector<int64_t>& dims = io.input(0).dims;
    std::vector<double> acc(static_cast<size_t>(product(data)));
    for_each_element(io.input(0), [&](int64_t i, double v) {
      int64_t at = 0, rest = i;
      for (size_t a = dims.size(); a-- > 0;) {
        const int64_t coord = rest % dims[a];
        rest /= dims[a];
        at += (r[a].start + coord * r[a].step) * strides[a];
      }
      acc[static_cast<size_t>(at)] = v;
    });
    store_all(acc, io.output(0));
  }

 private:
  struct Range {
    int64_t start = 0, step = 1, count = 0;
  };

  // ONNX Slice's clamping rules, per axis of the data.
  static std::vector<Range> ranges(const KernelIO& io, const std::vector<int64_t>& data) {
    const std::vector<int64_t> starts = read_ints(io.input(2)), ends = read_ints(io.input(3));
    std::vector<int64_t> axes = io.has_in(4) ? read_ints(io.input(4)) : std::vector<int64_t>();
    std::vector<int64_t> steps = io.has_in(5) ? read_ints(io.input(5)) : std::vector<int64_t>();
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      throw InputError("Slice starts, ends, axes and steps must have one length");
    std::vector<Range> r(data.size());
    for (size_t a = 0; a < data.size(); ++a) r[a].count = data[a];
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t a = static_cast<size_t>(normalize_axis(axes[i], static_cast<int64_t>(data.size())));
      const int64_t d = data[a], step = steps[i];
      if (step == 0) throw InputError("Slice step must not be 0");
      int64_t s = starts[i], e = ends[i];
      if (s < 0) s += d;
      if (e < 0 && e != std::numeric_limits<int64_t>::min()) e += d;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
      }
      r[a] = Range{s, step, std::max<int64_t>(0, step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step)};
    }
    return r;
  }
};

// a[j] += row[j] for j in [c0, c1), in fp64.
template <class T>
AMP_VECTOR_CLONES void add_row(double* a, const T* row, int64_t c0, int64_t c1) {
#pragma omp simd
  for (int64_t j = c0; j < c1; ++j) a[j] += static_cast<double>(load(row[j]));
}

class SumToShape final : public Kernel {
 public:
  SumToShape(const Node&, int64_t) {}
  size_t infer(KernelIO& io) const override {
    const std::vector<int64_t> to = shape_input(io.input(1));
    const std::vector<int64_t>& from = io.input(0).dims;
    bool ok = to.size() <= from.size();
    for (size_t i = 0; ok && i < to.size(); ++i) {
      const int64_t f = from[from.size() - to.size() + i];
      ok = to[i] == f || to[i] == 1;
    }
    if (!ok) throw InputError("cannot sum " + dims_str(from) + " down to " + dims_str(to));
    io.output(0).dtype = io.input(0).dtype;
    io.output(0).dims = to;
    if (product(to) == product(from)) return 0;  // nothing summed: dY passes through
    return static_cast<size_t>(product(to)) * sizeof(double);  // the fp64 sums
  }
  // Where it sums nothing (the output as many elements as dY: every summed axis has extent 1),
  // the output is dY's bytes: the planner, which views only a buffer of the same size, makes it a
  // view. Autodiff puts one after most gradient ops; after the loss gradient of a language model
  // it is tokens x vocabulary (GPT-2 at 2 x 1024 tokens: 393 MiB of copy and 785 MiB of fp64 scratch).
  bool aliases_input() const override { return true; }

  // dY is walked in rows of its innermost run of dims that are all kept or all summed (dims of
  // extent 1 merged away): a kept run adds a row onto a row of sums, a summed run adds each element
  // onto one sum. Each sum takes its terms in dY's order, as one loop over dY would; with several
  // cores, kept rows are split by columns, which keeps that order.
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& dy = io.input(0);
    const std::vector<int64_t> to = shape_input(io.input(1));
    const std::vector<int64_t>& from = dy.dims;
    if (from == to) {  // nothing to sum (autodiff emits these where broadcasting might have been)
      std::memcpy(io.output(0).data, dy.data, dy.nbytes());
      return;
    }
    const size_t lead = from.size() - to.size();
    int64_t ext[kMaxRank];
    bool kept[kMaxRank];
    int dims = 0;
    if (from.size() > kMaxRank) throw InputError("SumToShape supports up to " + std::to_string(kMaxRank) + " dims");
    for (size_t a = 0; a < from.size(); ++a) {
      if (from[a] == 1) continue;
      const bool k = a >= lead && to[a - lead] != 1;
      if (dims > 0 && kept[dims - 1] == k) {
        ext[dims - 1] *= from[a];
      } else {
        ext[dims] = from[a];
        kept[dims] = k;
        ++dims;
      }
    }
    auto* acc = static_cast<double*>(io.workspace);
    const int64_t count = product(to), total = dy.numel();
    std::fill(acc, acc + count, 0.0);
    dispatch(FloatTypes{}, dy.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = dy.as<T>();
      if (total > 0 && dims == 0) acc[0] = static_cast<double>(load(x[0]));
      if (total > 0 && dims > 0) {
        const int64_t inner = ext[dims - 1];
        const bool inner_kept = kept[dims - 1];
        // Strides of the kept dims in the sums (the inner one's is 1 when kept).
        int64_t sum_stride[kMaxRank] = {};
        int64_t step = 1;
        for (int d = dims; d-- > 0;)
          if (kept[d]) {
            sum_stride[d] = step;
            step *= ext[d];
          }
        const int64_t rows = total / inner;
        auto walk = [&](int64_t c0, int64_t c1) {
          int64_t coord[kMaxRank] = {};
          int64_t at = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const T* row = x + r * inner;
            if (inner_kept) {
              add_row(acc + at, row, c0, c1);
            } else {
              double a = acc[at];
              for (int64_t j = 0; j < inner; ++j) a += static_cast<double>(load(row[j]));
              acc[at] = a;
            }
            for (int d = dims - 2; d >= 0; --d) {  // the next row: odometer over the outer dims
              at += sum_stride[d];
              if (++coord[d] < ext[d]) break;
              at -= sum_stride[d] * ext[d];
              coord[d] = 0;
            }
          }
        };
        if (inner_kept)
          parallel_for(inner, ctx.threads, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(rows, 1)), walk);
        else
          walk(0, inner);
      }
    });
    View& out = io.output(0);
    dispatch(FloatTypes{}, out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = out.as<T>();
      for (int64_t i = 0; i < count; ++i) p[i] = convert<T>(acc[i]);
    });
  }

 private:
  static constexpr int kMaxRank = 16;
};

}  // namespace

const std::vector<OpEntry>& grad_scatter_ops() {
  static const std::vector<OpEntry> ops = {
      {"GatherGrad", make_kernel<GatherGrad>, FloatTypes::mask(), {1}},
      {"SliceGrad", make_kernel<SliceGrad>, FloatTypes::mask(), {1, 2, 3, 4, 5}},
      {"SumToShape", make_kernel<SumToShape>, FloatTypes::mask(), {1}},
  };
  return ops;
}

}  // namespace amp::cpu
