// ai.onnx.ml's preprocessing ops, which converters (CoreML's, scikit-learn's) put in front of or
// around networks: Scaler, ArrayFeatureExtractor, OneHotEncoder and FeatureVectorizer over numeric
// tensors (float, double, int32, int64; string tensors are refused by node), computed as ONNX
// Runtime computes them, ONNX's reference for these ops (its shapes: graph/ops/shape_rules.cc).
// They are not differentiable and amp-rewrite leaves them as they are (fp32 results).
#include <cstring>
#include <unordered_map>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "graph/ops/shape_rules.h"

namespace amp::cpu {
namespace {

using MlTypes = TypeList<float, double, int32_t, int64_t>;

// Y = (X - offset) * scale in float, offset and scale per feature (X's dim 1, or its only dim) or
// one for all; the arithmetic in X's type promoted with float (double stays double), as ONNX
// Runtime's kernel computes it.
class Scaler final : public Kernel {
 public:
  Scaler(const Node& n, int64_t) {
    if (const Attribute* a = n.attr("scale")) scale_ = a->floats;
    if (const Attribute* a = n.attr("offset")) offset_ = a->floats;
    if (scale_.empty() || scale_.size() != offset_.size())
      throw InputError("Scaler needs scale and offset of one length, got " + std::to_string(scale_.size()) + " and " +
                       std::to_string(offset_.size()));
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    if (x.rank() == 0) throw InputError("Scaler's X has no dims");
    const int64_t features = x.rank() == 1 ? x.dims[0] : x.dims[1];
    const bool per_feature = static_cast<int64_t>(scale_.size()) == features;
    if (!per_feature && scale_.size() != 1)
      throw InputError("Scaler's scale has " + std::to_string(scale_.size()) + " values for " + std::to_string(features) +
                       " features (it takes one per feature, or one)");
    float* y = io.output(0).as<float>();
    dispatch(MlTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.as<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const size_t k = per_feature ? static_cast<size_t>(i % features) : 0;
        y[i] = static_cast<float>((in[i] - offset_[k]) * scale_[k]);
      }
    });
  }

 private:
  std::vector<float> scale_, offset_;
};

// Z = X's elements at the indices Y along its last dim, for every position of the others.
class ArrayFeatureExtractor final : public Kernel {
 public:
  ArrayFeatureExtractor(const Node&, int64_t) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    const View& idx = io.input(1);
    if (idx.dtype != DType::kInt64) throw InputError("ArrayFeatureExtractor's indices must be int64");
    const int64_t last = x.dims.back(), rows = x.numel() / std::max<int64_t>(last, 1), k = idx.numel();
    if (k == 0) throw InputError("ArrayFeatureExtractor has no indices");
    const int64_t* at = idx.as<int64_t>();
    for (int64_t j = 0; j < k; ++j)
      if (at[j] < 0 || at[j] >= last)
        throw InputError("ArrayFeatureExtractor's index " + std::to_string(at[j]) + " is outside [0, " +
                         std::to_string(last) + ")");
    const size_t elem = dtype_size(x.dtype);  // X's type is one of MlTypes (the op table's check)
    const auto* in = static_cast<const uint8_t*>(x.data);
    auto* out = static_cast<uint8_t*>(io.output(0).data);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) std::memcpy(out + (r * k + j) * elem, in + (r * last + at[j]) * elem, elem);
  }
};

// Y[..., c] = 1 where X (as int64, floats truncated) is category c of cats_int64s, else 0; a value
// of no category gives a row of zeros, or an error when zeros = 0.
class OneHotEncoder final : public Kernel {
 public:
  OneHotEncoder(const Node& n, int64_t) : zeros_(n.attr_int("zeros", 1) != 0) {
    const std::vector<int64_t> cats = n.attr_ints("cats_int64s");
    if (const Attribute* s = n.attr("cats_strings"); s && !s->strings.empty())
      throw InputError("OneHotEncoder with string categories is not supported (this backend has no string tensors)");
    if (cats.empty()) throw InputError("OneHotEncoder has no categories");
    for (size_t c = 0; c < cats.size(); ++c) index_.emplace(cats[c], static_cast<int64_t>(c));
    categories_ = static_cast<int64_t>(cats.size());
  }
  void run(KernelIO& io, const RunContext&) const override {
    const View& x = io.input(0);
    float* y = io.output(0).as<float>();
    std::fill(y, y + io.output(0).numel(), 0.0f);
    dispatch(MlTypes{}, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.as<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        auto it = index_.find(static_cast<int64_t>(in[i]));
        if (it != index_.end()) y[i * categories_ + it->second] = 1.0f;
        else if (!zeros_) throw InputError("OneHotEncoder: " + std::to_string(static_cast<int64_t>(in[i])) +
                                           " is no category and zeros is 0");
      }
    });
  }

 private:
  bool zeros_;
  int64_t categories_ = 0;
  std::unordered_map<int64_t, int64_t> index_;
};

// Y [N, sum of inputdimensions] in float: each input's rows (its first dim; a 1-D input is one row
// of all its values) side by side, each cut to or padded with zeros to its inputdimensions entry.
class FeatureVectorizer final : public Kernel {
 public:
  FeatureVectorizer(const Node& n, int64_t) : widths_(n.attr_ints("inputdimensions")) {
    if (widths_.size() != n.inputs().size())
      throw InputError("FeatureVectorizer has " + std::to_string(n.inputs().size()) + " inputs but " +
                       std::to_string(widths_.size()) + " inputdimensions");
  }
  void run(KernelIO& io, const RunContext&) const override {
    View& y = io.output(0);
    const int64_t rows = y.dims[0], total = y.dims[1];
    float* out = y.as<float>();
    std::fill(out, out + y.numel(), 0.0f);
    int64_t at = 0;
    for (size_t i = 0; i < io.in.size(); ++i) {
      const View& x = io.input(i);
      const int64_t x_rows = x.rank() <= 1 ? 1 : x.dims[0];
      if (x_rows != rows)
        throw InputError("FeatureVectorizer's input " + std::to_string(i) + " has " + std::to_string(x_rows) +
                         " rows, the first has " + std::to_string(rows));
      const int64_t row = x_rows ? x.numel() / x_rows : 0, take = std::min(row, widths_[i]);
      dispatch(MlTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* in = x.as<T>();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < take; ++c) out[r * total + at + c] = static_cast<float>(in[r * row + c]);
      });
      at += widths_[i];
    }
  }

 private:
  std::vector<int64_t> widths_;
};

}  // namespace

const OpEntry* find_classical_ml_op(std::string_view op) {
  static const std::vector<OpEntry> ops = {
      with_shape_rule({"Scaler", make_kernel<Scaler>, MlTypes::mask(), {}}, kOnnxMlDomain),
      with_shape_rule({"ArrayFeatureExtractor", make_kernel<ArrayFeatureExtractor>, MlTypes::mask(), {}}, kOnnxMlDomain),
      with_shape_rule({"OneHotEncoder", make_kernel<OneHotEncoder>, MlTypes::mask(), {}}, kOnnxMlDomain),
      with_shape_rule({"FeatureVectorizer", make_kernel<FeatureVectorizer>, MlTypes::mask(), {}}, kOnnxMlDomain),
  };
  for (const OpEntry& e : ops)
    if (e.op == op) return &e;
  return nullptr;
}

}  // namespace amp::cpu
