// GatherElements and ScatterElements: element by element along one axis. Each position p of
// `indices` (of the data's rank, no larger than the data in any other dim) names the data element
// at p with its `axis` coordinate replaced by indices[p]; GatherElements reads it, ScatterElements
// writes updates[p] there (or adds, multiplies: reduction add, mul; opset 18's max, min: the
// ai.onnx_amp ScatterElements) into a copy of the data, in order, so a repeated index keeps the
// last write, as ONNX's reference does.
#include <cstring>

#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/kernel_util.h"
#include "backends/cpu/scatter_reduction.h"

namespace amp::cpu {
namespace {

// Checks indices against data (rank, extents) and returns, per position of indices, the element
// offset in data it names. `op` names the op in errors.
std::vector<int64_t> element_offsets(const char* op, const View& data, const View& indices, size_t axis) {
  if (indices.rank() != data.rank())
    throw InputError(std::string(op) + " indices " + dims_str(indices.dims) + " must have the data's rank " +
                     std::to_string(data.rank()));
  for (size_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dims[d] > data.dims[d])
      throw InputError(std::string(op) + " indices " + dims_str(indices.dims) + " exceed the data " + dims_str(data.dims) +
                       " along dim " + std::to_string(d));
  const std::vector<int64_t> idx = read_ints(indices), strides = strides_of(data.dims);
  const int64_t extent = data.dims[axis];
  std::vector<int64_t> offsets(idx.size());
  std::vector<int64_t> coord(indices.rank(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    int64_t i = idx[k];
    if (i < -extent || i >= extent)
      throw InputError(std::string(op) + " index " + std::to_string(i) + " is out of range for axis extent " +
                       std::to_string(extent));
    if (i < 0) i += extent;
    int64_t at = 0;
    for (size_t d = 0; d < coord.size(); ++d) at += (d == axis ? i : coord[d]) * strides[d];
    offsets[k] = at;
    for (size_t d = coord.size(); d-- > 0;) {
      if (++coord[d] < indices.dims[d]) break;
      coord[d] = 0;
    }
  }
  return offsets;
}

size_t axis_of(int64_t axis, const View& data) {
  if (data.rank() == 0) throw InputError("the data must have rank >= 1");
  return static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(data.rank())));
}

class GatherElements final : public Kernel {
 public:
  GatherElements(const Node& n, int64_t) : axis_(n.attr_int("axis", 0)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View &data = io.input(0), &indices = io.input(1);
    const std::vector<int64_t> at = element_offsets("GatherElements", data, indices, axis_of(axis_, data));
    const size_t esize = dtype_size(data.dtype);
    const auto* src = static_cast<const uint8_t*>(data.data);
    auto* dst = static_cast<uint8_t*>(io.output(0).data);
    for (size_t k = 0; k < at.size(); ++k) std::memcpy(dst + k * esize, src + static_cast<size_t>(at[k]) * esize, esize);
  }

 private:
  int64_t axis_;
};

class ScatterElements final : public Kernel {
 public:
  ScatterElements(const Node& n, int64_t)
      : axis_(n.attr_int("axis", 0)), reduction_(scatter_reduction(n)) {}
  void run(KernelIO& io, const RunContext&) const override {
    const View &data = io.input(0), &indices = io.input(1), &updates = io.input(2);
    if (updates.dims != indices.dims)
      throw InputError("ScatterElements updates " + dims_str(updates.dims) + " must have the indices' shape " +
                       dims_str(indices.dims));
    const std::vector<int64_t> at = element_offsets("ScatterElements", data, indices, axis_of(axis_, data));
    View& out = io.output(0);
    if (data.nbytes()) std::memcpy(out.data, data.data, data.nbytes());
    dispatch(AllTypes{}, data.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = out.as<T>();
      const T* u = updates.as<T>();
      for (size_t k = 0; k < at.size(); ++k) {
        T& dst = o[at[k]];
        const T v = u[k];
        scatter_combine(dst, v, reduction_);
      }
    });
  }

 private:
  int64_t axis_;
  ScatterReduction reduction_;
};

}  // namespace

const std::vector<OpEntry>& gather_elements_ops() {
  static const std::vector<OpEntry> ops = {{"GatherElements", make_kernel<GatherElements>, AllTypes::mask(), {}},
                                           {"ScatterElements", make_kernel<ScatterElements>, AllTypes::mask(), {}}};
  return ops;
}

const std::vector<OpEntry>& scatter_elements_opset18_ops() {
  static const std::vector<OpEntry> ops = {{"ScatterElements", make_kernel<ScatterElements>, AllTypes::mask(), {}}};
  return ops;
}

}  // namespace amp::cpu
