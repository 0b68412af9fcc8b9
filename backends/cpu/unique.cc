// Unique: the distinct elements of the flattened input (or, with `axis`, the distinct slices along
// it), ascending (sorted, the default; slices compared element by element in row-major order) or
// in order of first appearance; with int64 indices (each one's first appearance), inverse_indices
// (each input element's or slice's place in Y) and counts. How many there are depends on the data,
// so the op runs while its plan is made (Kernel::runs_while_planning): every input is known then,
// and the outputs are constants of the plan, made again for other inputs.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {
namespace {

class Unique final : public Kernel {
 public:
  Unique(const Node& n, int64_t) : has_axis_(n.attr("axis") != nullptr), axis_(n.attr_int("axis", 0)), sorted_(n.attr_int("sorted", 1) != 0) {}
  bool runs_while_planning() const override { return true; }

  size_t infer(KernelIO& io) const override {
    results_ = compute(io.input(0));
    for (size_t k = 0; k < io.out.size() && k < results_.size(); ++k)
      if (io.has_out(k)) {
        io.output(k).dtype = results_[k].dtype;
        io.output(k).dims = results_[k].dims;
      }
    return 0;
  }

  void run(KernelIO& io, const RunContext&) const override {
    if (results_.empty()) results_ = compute(io.input(0));
    for (size_t k = 0; k < io.out.size() && k < results_.size(); ++k)
      if (io.has_out(k) && results_[k].nbytes()) std::memcpy(io.output(k).data, results_[k].data(), results_[k].nbytes());
    results_.clear();
  }

 private:
  std::vector<Tensor> compute(const View& x) const {
    int64_t outer = 1, extent = x.numel(), inner = 1;
    size_t axis = 0;
    if (has_axis_) {
      axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank())));
      outer = product(x.dims, 0, axis);
      extent = x.dims[axis];
      inner = product(x.dims, axis + 1);
    }
    std::vector<int64_t> first, inverse(static_cast<size_t>(extent)), counts;
    dispatch(AllTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* v = x.as<T>();
      // Slice k's element j (j over outer · inner, row-major) and the order of two slices.
      auto at = [&](int64_t k, int64_t j) { return load(v[(j / inner * extent + k) * inner + j % inner]); };
      auto compare = [&](int64_t a, int64_t b) {
        for (int64_t j = 0; j < outer * inner; ++j) {
          const auto p = at(a, j), q = at(b, j);
          if (p < q) return -1;
          if (q < p) return 1;
        }
        return 0;
      };
      std::vector<int64_t> order(static_cast<size_t>(extent));
      for (int64_t k = 0; k < extent; ++k) order[static_cast<size_t>(k)] = k;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
      // Groups of equal slices in sorted order; each group's first member is its first appearance.
      std::vector<int64_t> group_of(static_cast<size_t>(extent));
      std::vector<int64_t> group_first;
      for (size_t i = 0; i < order.size(); ++i) {
        if (i == 0 || compare(order[i - 1], order[i]) != 0) group_first.push_back(order[i]);
        group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(group_first.size()) - 1;
      }
      // The groups' places in Y: as sorted, or by first appearance.
      std::vector<int64_t> place(group_first.size());
      std::vector<int64_t> groups(group_first.size());
      for (size_t g = 0; g < groups.size(); ++g) groups[g] = static_cast<int64_t>(g);
      if (!sorted_)
        std::sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return group_first[static_cast<size_t>(a)] < group_first[static_cast<size_t>(b)]; });
      for (size_t p = 0; p < groups.size(); ++p) place[static_cast<size_t>(groups[p])] = static_cast<int64_t>(p);
      first.resize(groups.size());
      counts.assign(groups.size(), 0);
      for (size_t p = 0; p < groups.size(); ++p) first[p] = group_first[static_cast<size_t>(groups[p])];
      for (int64_t k = 0; k < extent; ++k) {
        const int64_t p = place[static_cast<size_t>(group_of[static_cast<size_t>(k)])];
        inverse[static_cast<size_t>(k)] = p;
        ++counts[static_cast<size_t>(p)];
      }
    });
    const int64_t n = static_cast<int64_t>(first.size());
    std::vector<int64_t> ydims = has_axis_ ? x.dims : std::vector<int64_t>{n};
    if (has_axis_) ydims[axis] = n;
    Tensor y(x.dtype, ydims);
    const size_t esize = dtype_size(x.dtype);
    const auto* src = static_cast<const uint8_t*>(x.data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < n; ++p)
        std::memcpy(y.mutable_data() + static_cast<size_t>((o * n + p) * inner) * esize,
                    src + static_cast<size_t>((o * extent + first[static_cast<size_t>(p)]) * inner) * esize,
                    static_cast<size_t>(inner) * esize);
    auto ints = [](const std::vector<int64_t>& v) {
      Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
      if (!v.empty()) std::memcpy(t.mutable_data(), v.data(), v.size() * sizeof(int64_t));
      return t;
    };
    return {std::move(y), ints(first), ints(inverse), ints(counts)};
  }

  bool has_axis_;
  int64_t axis_;
  bool sorted_;
  mutable std::vector<Tensor> results_;  // from infer() to the run() after it
};

}  // namespace

const std::vector<OpEntry>& unique_ops() {
  static const std::vector<OpEntry> ops = {{"Unique", make_kernel<Unique>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
