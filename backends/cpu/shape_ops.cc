// Data movement: Reshape, Flatten, Squeeze, Unsqueeze, Identity (copies), Transpose, Slice and
// Expand (one strided gather each), Concat, Split, Gather, Shape, and Trilu's triangle mask.
// These never compute, so they move elements by size (1, 2, 4 or 8 bytes) whatever the type.
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

// Calls f(Tag<E>) with E an unsigned integer of the element's size.
template <class F>
void dispatch_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    case 8: return f(Tag<uint64_t>{});
    default: throw InputError("element type " + std::string(dtype_name(t)) + " is not supported");
  }
}

// out (contiguous, dims) [i0, .., ik] = in[base + sum(i_d * strides[d])].
// One output row: inner elements read `step` apart (Expand's broadcast rows read step 0).
template <class E>
AMP_VECTOR_CLONES void gather_row(const E* src, int64_t step, E* row, int64_t inner) {
  if (step == 1) {
    for (int64_t i = 0; i < inner; ++i) row[i] = src[i];
  } else {
    for (int64_t i = 0; i < inner; ++i) row[i] = src[i * step];
  }
}

void strided_gather(const View& in, int64_t base, const std::vector<int64_t>& strides, View& out, int threads) {
  if (out.numel() == 0) return;
  // Merge output dims that are contiguous in the input too (a [N,T,H,D] -> [N,H,T,D] transpose
  // moves rows of D), and drop dims of extent 1: fewer, longer rows.
  std::vector<int64_t> dims, st;
  for (size_t d = 0; d < out.dims.size(); ++d) {
    if (out.dims[d] == 1) continue;
    if (!dims.empty() && st.back() == strides[d] * out.dims[d]) {
      dims.back() *= out.dims[d];
      st.back() = strides[d];
      continue;
    }
    dims.push_back(out.dims[d]);
    st.push_back(strides[d]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    st.push_back(0);
  }
  constexpr size_t kMaxRank = 32;
  if (dims.size() > kMaxRank) throw InputError("tensors of more than 32 dims are not supported");
  const int64_t inner = dims.back(), step = st.back();
  const int64_t rows = out.numel() / inner;
  const size_t outer = dims.size() - 1;
  dispatch_size(in.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = in.as<E>();
    E* dst = out.as<E>();
    parallel_for(rows, threads, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t r0, int64_t r1) {
      // The first row's coordinate, then an odometer: no division per row.
      int64_t coord[kMaxRank] = {};
      int64_t off = base;
      for (size_t d = outer, rest = static_cast<size_t>(r0); d-- > 0;) {
        coord[d] = static_cast<int64_t>(rest) % dims[d];
        rest /= static_cast<size_t>(dims[d]);
        off += coord[d] * st[d];
      }
      for (int64_t r = r0; r < r1; ++r) {
        E* row = dst + r * inner;
        if (step == 1 && inner >= 64)
          std::memcpy(row, src + off, static_cast<size_t>(inner) * sizeof(E));
        else
          gather_row(src + off, step, row, inner);
        for (size_t d = outer; d-- > 0;) {
          off += st[d];
          if (++coord[d] < dims[d]) break;
          off -= st[d] * dims[d];
          coord[d] = 0;
        }
      }
    });
  });
}

void copy_data(const View& in, View& out) {
  if (in.nbytes()) std::memcpy(out.data, in.data, in.nbytes());
}

// Reshape, Flatten, Squeeze, Unsqueeze and Identity: new dims (the op's shape rule), same bytes.
class Copy final : public Kernel {
 public:
  Copy(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext&) const override { copy_data(io.input(0), io.output(0)); }
  bool aliases_input() const override { return true; }
};

class Transpose final : public Kernel {
 public:
  Transpose(const Node& n, int64_t) : perm_attr_(n.attr_ints("perm")) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    const std::vector<int64_t> p = perm(x.rank()), in_strides = strides_of(x.dims);
    std::vector<int64_t> strides;
    for (int64_t d : p) strides.push_back(in_strides[d]);
    strided_gather(x, 0, strides, io.output(0), ctx.threads);
  }

 private:
  std::vector<int64_t> perm(size_t rank) const {
    std::vector<int64_t> p = perm_attr_;
    if (p.empty())
      for (size_t i = rank; i-- > 0;) p.push_back(static_cast<int64_t>(i));
    std::vector<bool> seen(rank, false);
    if (p.size() != rank) throw InputError("Transpose perm " + dims_str(p) + " does not match rank " + std::to_string(rank));
    for (int64_t d : p) {
      if (d < 0 || d >= static_cast<int64_t>(rank) || seen[d]) throw InputError("Transpose perm " + dims_str(p) + " is not a permutation");
      seen[d] = true;
    }
    return p;
  }
  std::vector<int64_t> perm_attr_;
};

// Slice: starts, ends, axes, steps as inputs (opset 10+) or attributes (opset 1).
class Slice final : public Kernel {
 public:
  Slice(const Node& n, int64_t opset) : attrs_(opset < 10) {
    if (attrs_) {
      starts_ = n.attr_ints("starts");
      ends_ = n.attr_ints("ends");
      axes_ = n.attr_ints("axes");
    }
  }
  void run(KernelIO& io, const RunContext& ctx) const override {
    const Region r = region(io);
    strided_gather(io.input(0), r.base, r.strides, io.output(0), ctx.threads);
  }

 private:
  struct Region {
    std::vector<int64_t> dims, strides;
    int64_t base = 0;
  };
  Region region(const KernelIO& io) const {
    const View& x = io.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    if (!attrs_) {
      starts = read_ints(io.input(1));
      ends = read_ints(io.input(2));
      if (io.has_in(3)) axes = read_ints(io.input(3));
      if (io.has_in(4)) steps = read_ints(io.input(4));
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      throw InputError("Slice starts, ends, axes and steps have different lengths");
    Region r;
    r.dims = x.dims;
    const std::vector<int64_t> in_strides = strides_of(x.dims);
    std::vector<int64_t> step_of(x.rank(), 1), start_of(x.rank(), 0);
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t a = static_cast<size_t>(normalize_axis(axes[i], rank));
      const int64_t dim = x.dims[a], step = steps[i];
      if (step == 0) throw InputError("Slice step must not be 0");
      int64_t s = starts[i], e = ends[i];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
      }
      const int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step;
      r.dims[a] = std::max<int64_t>(0, n);
      step_of[a] = step;
      start_of[a] = s;
    }
    for (size_t a = 0; a < x.rank(); ++a) {
      r.strides.push_back(in_strides[a] * step_of[a]);
      r.base += start_of[a] * in_strides[a];
    }
    return r;
  }
  bool attrs_;
  std::vector<int64_t> starts_, ends_, axes_;
};

class Expand final : public Kernel {
 public:
  Expand(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View& x = io.input(0);
    View& y = io.output(0);
    const std::vector<int64_t> in_strides = strides_of(x.dims);
    std::vector<int64_t> strides(y.rank(), 0);
    const size_t shift = y.rank() - x.rank();
    for (size_t d = 0; d < x.rank(); ++d) strides[shift + d] = x.dims[d] == 1 ? 0 : in_strides[d];
    strided_gather(x, 0, strides, y, ctx.threads);
  }
};

class Concat final : public Kernel {
 public:
  Concat(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  void run(KernelIO& io, const RunContext&) const override {
    View& y = io.output(0);
    if (y.rank() == 0) throw InputError("Concat joins tensors along an axis; its inputs are scalars");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(y.rank())));
    const size_t elem = dtype_size(y.dtype);
    const int64_t outer = product(y.dims, 0, axis);
    const size_t out_row = static_cast<size_t>(product(y.dims, axis)) * elem;
    size_t offset = 0;
    for (const View* v : io.in) {
      const size_t row = static_cast<size_t>(product(v->dims, axis)) * elem;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<uint8_t*>(y.data) + o * out_row + offset, static_cast<const uint8_t*>(v->data) + o * row,
                    row);
      offset += row;
    }
  }

 private:
  int64_t axis_;
};

// Split: sizes from input 1 (opset 13+), the attribute (before), or equal parts.
class Split final : public Kernel {
 public:
  Split(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)), split_attr_(n.attr_ints("split")) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const std::vector<int64_t> sizes = parts(io, x.dims[axis]);
    const size_t elem = dtype_size(x.dtype), inner = static_cast<size_t>(product(x.dims, axis + 1)) * elem;
    const int64_t outer = product(x.dims, 0, axis);
    const size_t in_row = static_cast<size_t>(x.dims[axis]) * inner;
    size_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const size_t row = static_cast<size_t>(sizes[i]) * inner;
      if (io.has_out(i))
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<uint8_t*>(io.output(i).data) + o * row,
                      static_cast<const uint8_t*>(x.data) + o * in_row + offset, row);
      offset += row;
    }
  }

 private:
  std::vector<int64_t> parts(const KernelIO& io, int64_t extent) const {
    std::vector<int64_t> sizes = io.has_in(1) ? read_ints(io.input(1)) : split_attr_;
    const int64_t n = static_cast<int64_t>(io.out.size());
    if (sizes.empty()) {
      if (extent % n != 0) throw InputError("cannot split " + std::to_string(extent) + " into " + std::to_string(n) + " equal parts");
      sizes.assign(static_cast<size_t>(n), extent / n);
    }
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    if (static_cast<int64_t>(sizes.size()) != n || total != extent)
      throw InputError("split " + dims_str(sizes) + " does not cover " + std::to_string(extent) + " in " + std::to_string(n) + " outputs");
    return sizes;
  }
  int64_t axis_;
  std::vector<int64_t> split_attr_;
};

class Gather final : public Kernel {
 public:
  Gather(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  void run(KernelIO& io, const RunContext& ctx) const override {
    const View &x = io.input(0), &idx = io.input(1);
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t outer = product(x.dims, 0, axis), extent = x.dims[axis], count = idx.numel();
    const size_t block = static_cast<size_t>(product(x.dims, axis + 1)) * dtype_size(x.dtype);
    std::vector<int64_t> at = read_ints(idx);
    for (int64_t& i : at) {
      if (i < -extent || i >= extent)
        throw InputError("Gather index " + std::to_string(i) + " is out of range for axis extent " + std::to_string(extent));
      if (i < 0) i += extent;
    }
    const auto* src = static_cast<const uint8_t*>(x.data);
    auto* dst = static_cast<uint8_t*>(io.output(0).data);
    parallel_for(outer * count, ctx.threads, std::max<int64_t>(1, kParallelGrain / std::max<size_t>(block, 1)),
                 [&](int64_t j0, int64_t j1) {
                   for (int64_t j = j0; j < j1; ++j)
                     std::memcpy(dst + j * block, src + (j / count * extent + at[j % count]) * block, block);
                 });
  }

 private:
  int64_t axis_;
};

class ShapeOf final : public Kernel {
 public:
  ShapeOf(const Node& n, int64_t) : start_(n.attr_int("start", 0)), end_(n.attr_int("end", INT64_MAX)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const auto [b, e] = range(io.input(0).rank());
    std::copy(io.input(0).dims.begin() + b, io.input(0).dims.begin() + e, io.output(0).as<int64_t>());
  }

 private:
  std::pair<size_t, size_t> range(size_t rank) const {
    const int64_t r = static_cast<int64_t>(rank);
    auto clamp = [&](int64_t v) { return static_cast<size_t>(std::clamp<int64_t>(v < 0 ? v + r : v, 0, r)); };
    const size_t b = clamp(start_), e = clamp(end_);
    return {b, std::max(b, e)};
  }
  int64_t start_, end_;
};

// Size: the input's element count (int64 scalar).
class SizeOf final : public Kernel {
 public:
  SizeOf(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext&) const override { io.output(0).as<int64_t>()[0] = io.input(0).numel(); }
};

// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims.
class Trilu final : public Kernel {
 public:
  Trilu(const Node& n, int64_t) : upper_(n.attr_int("upper", 1) != 0) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const int64_t k = io.has_in(1) ? read_ints(io.input(1)).at(0) : 0;
    const int64_t rows = x.dims[x.rank() - 2], cols = x.dims.back(), mats = x.numel() / std::max<int64_t>(1, rows * cols);
    dispatch_size(x.dtype, [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* src = x.as<E>();
      E* dst = io.output(0).as<E>();
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t at = (m * rows + i) * cols + j;
            const bool keep = upper_ ? j - i >= k : j - i <= k;
            dst[at] = keep ? src[at] : E(0);
          }
    });
  }

 private:
  bool upper_;
};

}  // namespace

const std::vector<OpEntry>& shape_ops() {
  constexpr uint32_t kAny = AllTypes::mask();
  static const std::vector<OpEntry> ops = {
      {"Reshape", make_kernel<Copy>, kAny, {}},
      {"Flatten", make_kernel<Copy>, kAny, {}},
      {"Squeeze", make_kernel<Copy>, kAny, {}},
      {"Unsqueeze", make_kernel<Copy>, kAny, {}},
      {"Identity", make_kernel<Copy>, kAny, {}},
      {"Transpose", make_kernel<Transpose>, kAny, {}},
      {"Slice", make_kernel<Slice>, kAny, {}},
      {"Expand", make_kernel<Expand>, kAny, {}},
      {"Concat", make_kernel<Concat>, kAny, {}},
      {"Split", make_kernel<Split>, kAny, {}},
      {"Gather", make_kernel<Gather>, kAny, {}},
      {"Shape", make_kernel<ShapeOf>, kAny, {}, false},
      {"Size", make_kernel<SizeOf>, kAny, {}, false},
      {"Trilu", make_kernel<Trilu>, kAny, {}},
  };
  return ops;
}

}  // namespace amp::cpu
