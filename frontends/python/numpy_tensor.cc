#include "frontends/python/numpy_tensor.h"

#include <memory>

#include "graph/error.h"
#include "graph/half.h"

namespace amp::python {

namespace {

// The memory of a numpy array, kept alive by a reference to it. Tensors made from it may be
// destroyed on a thread without the GIL: the reference is dropped under it.
class NumpyBuffer final : public Buffer {
 public:
  explicit NumpyBuffer(py::array array)
      : data_(static_cast<const uint8_t*>(array.data())), size_(static_cast<size_t>(array.nbytes())),
        array_(std::move(array)) {}
  ~NumpyBuffer() override {
    py::gil_scoped_acquire gil;
    py::object drop = std::move(array_);
  }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  py::object array_;
};

// numpy's kind and item size -> DType; kUndefined for what has no ONNX type here.
DType dtype_of(const py::dtype& d) {
  const char kind = d.kind();
  const size_t size = static_cast<size_t>(d.itemsize());
  struct Row {
    char kind;
    size_t size;
    DType type;
  };
  static constexpr Row kTypes[] = {
      {'f', 4, DType::kFloat},  {'f', 2, DType::kFloat16}, {'f', 8, DType::kDouble}, {'i', 8, DType::kInt64},
      {'i', 4, DType::kInt32},  {'i', 2, DType::kInt16},   {'i', 1, DType::kInt8},   {'u', 1, DType::kUInt8},
      {'u', 2, DType::kUInt16}, {'u', 4, DType::kUInt32},  {'u', 8, DType::kUInt64}, {'b', 1, DType::kBool},
  };
  for (const Row& r : kTypes)
    if (r.kind == kind && r.size == size) return r.type;
  return DType::kUndefined;
}

const char* numpy_name(DType t) {
  switch (t) {
    case DType::kFloat: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kDouble: return "float64";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt16: return "int16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    default: return nullptr;
  }
}

std::vector<int64_t> dims_of(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

}  // namespace

Tensor tensor_from_numpy(py::handle value, const std::string& what, DType wanted) {
  py::array a = py::array::ensure(value);
  if (!a) throw InputError(what + ": not an array (numpy.asarray cannot read it)");
  if (!a.dtype().attr("isnative").cast<bool>())
    throw InputError(what + ": a byte-swapped array (" + py::str(a.dtype()).cast<std::string>() +
                     "); pass it in native byte order (array.astype(array.dtype.newbyteorder('=')))");
  if (!(a.flags() & py::array::c_style)) a = py::array::ensure(a, py::array::c_style);
  const DType type = dtype_of(a.dtype());
  if (type == DType::kUndefined)
    throw InputError(what + ": numpy type " + py::str(a.dtype()).cast<std::string>() + " has no ONNX tensor type here");
  if (wanted == DType::kBFloat16 && type == DType::kUInt16) {
    auto buffer = std::make_shared<NumpyBuffer>(a);
    return Tensor::view(DType::kBFloat16, dims_of(a), std::move(buffer), 0);
  }
  if (wanted == DType::kBFloat16 && type == DType::kFloat) {
    Tensor t(DType::kBFloat16, dims_of(a));
    const float* in = static_cast<const float*>(a.data());
    uint16_t* out = t.mutable_as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = fp32_to_bf16(in[i]);
    return t;
  }
  auto buffer = std::make_shared<NumpyBuffer>(a);
  return Tensor::view(type, dims_of(a), std::move(buffer), 0);
}

py::array numpy_from_tensor(Tensor t) {
  std::vector<py::ssize_t> shape(t.dims.begin(), t.dims.end());
  if (t.dtype == DType::kBFloat16) {
    py::array_t<float> out(shape);
    const uint16_t* in = t.as<uint16_t>();
    float* o = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = bf16_to_fp32(in[i]);
    return std::move(out);
  }
  const char* name = numpy_name(t.dtype);
  if (!name) throw Error("tensor '" + t.name + "' of type " + std::string(dtype_name(t.dtype)) + " has no numpy type");
  // The array takes the Tensor's storage: storage shared with something else (a mapped file, a
  // constant) is copied first by mutable_data(), so the array may be written.
  auto owner = std::make_unique<Tensor>(std::move(t));
  void* data = owner->mutable_data();
  py::capsule keep(owner.get(), [](void* p) { delete static_cast<Tensor*>(p); });
  owner.release();
  return py::array(py::dtype(name), shape, data, keep);
}

std::vector<std::pair<std::string, Tensor>> tensors_from_dict(const py::dict& arrays, const std::string& what) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [key, value] : arrays) {
    if (!py::isinstance<py::str>(key)) throw InputError(what + ": keys must be strings (input names)");
    const std::string name = key.cast<std::string>();
    out.emplace_back(name, tensor_from_numpy(value, what + "['" + name + "']"));
  }
  return out;
}

py::dict dict_from_tensors(std::vector<std::pair<std::string, Tensor>> tensors) {
  py::dict out;
  for (auto& [name, t] : tensors) out[py::str(name)] = numpy_from_tensor(std::move(t));
  return out;
}

}  // namespace amp::python
