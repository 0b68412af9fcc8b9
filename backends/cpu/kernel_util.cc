#include "backends/cpu/kernel_util.h"

#include "graph/error.h"

namespace amp::cpu {

int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw InputError("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> read_ints(const View& v) {
  std::vector<int64_t> out(static_cast<size_t>(v.numel()));
  if (v.dtype == DType::kInt64)
    std::copy(v.as<int64_t>(), v.as<int64_t>() + out.size(), out.begin());
  else if (v.dtype == DType::kInt32)
    std::copy(v.as<int32_t>(), v.as<int32_t>() + out.size(), out.begin());
  else
    throw InputError("expected an int64 or int32 shape input, got " + std::string(dtype_name(v.dtype)));
  return out;
}

int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, dims.size()); ++i) n *= dims[i];
  return n;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::vector<int64_t> Broadcast::result_dims(const std::vector<const std::vector<int64_t>*>& inputs) {
  size_t rank = 0;
  for (auto* d : inputs) rank = std::max(rank, d->size());
  std::vector<int64_t> out(rank, 1);
  for (auto* d : inputs) {
    const size_t shift = rank - d->size();
    for (size_t i = 0; i < d->size(); ++i) {
      const int64_t v = (*d)[i];
      int64_t& o = out[shift + i];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      std::string shapes;
      for (auto* e : inputs) shapes += (shapes.empty() ? "" : " and ") + dims_str(*e);
      throw InputError("shapes " + shapes + " do not broadcast");
    }
  }
  return out;
}

Broadcast::Broadcast(const std::vector<const std::vector<int64_t>*>& inputs) {
  out_dims_ = result_dims(inputs);
  const size_t rank = out_dims_.size(), n = inputs.size();
  // Per input and dim: does the input move along this dim (its extent matches a non-1 output)?
  auto moves = [&](size_t k, size_t d) {
    const auto& dims = *inputs[k];
    const size_t shift = rank - dims.size();
    return d >= shift && dims[d - shift] != 1;
  };
  // Merge runs of dims whose move pattern is the same for every input; dims of extent 1 merge
  // with anything.
  std::vector<int64_t> merged;
  std::vector<std::vector<bool>> pattern;  // per merged dim, per input
  for (size_t d = 0; d < rank; ++d) {
    if (out_dims_[d] == 1) continue;
    std::vector<bool> p(n);
    for (size_t k = 0; k < n; ++k) p[k] = moves(k, d);
    if (!merged.empty() && pattern.back() == p) {
      merged.back() *= out_dims_[d];
    } else {
      merged.push_back(out_dims_[d]);
      pattern.push_back(p);
    }
  }
  inner_stride_.assign(n, 1);
  if (!merged.empty()) {
    inner_ = merged.back();
    for (size_t k = 0; k < n; ++k) inner_stride_[k] = pattern.back()[k] ? 1 : 0;
    merged.pop_back();
    pattern.pop_back();
  }
  outer_dims_ = merged;
  outer_stride_.assign(n, std::vector<int64_t>(merged.size(), 0));
  for (size_t k = 0; k < n; ++k) {
    int64_t s = inner_stride_[k] ? inner_ : 1;
    for (size_t d = merged.size(); d-- > 0;) {
      if (pattern[d][k]) {
        outer_stride_[k][d] = s;
        s *= merged[d];
      }
    }
  }
  rows_ = product(outer_dims_);
  if (product(out_dims_) == 0) rows_ = 0;
}

void Broadcast::row_offsets(int64_t r, int64_t* offsets) const {
  const size_t n = inner_stride_.size();
  for (size_t k = 0; k < n; ++k) offsets[k] = 0;
  for (size_t d = outer_dims_.size(); d-- > 0;) {
    const int64_t i = r % outer_dims_[d];
    r /= outer_dims_[d];
    for (size_t k = 0; k < n; ++k) offsets[k] += i * outer_stride_[k][d];
  }
}

}  // namespace amp::cpu
