#include "graph/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstring>

#include "graph/error.h"

namespace amp {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "raw tensor bytes are little-endian, as ONNX stores them");

namespace {

// Far beyond any real tensor, and small enough that byte counts never overflow.
constexpr int64_t kMaxElements = int64_t(1) << 58;

int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw InputError(where + " has a negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxElements / d) throw InputError(where + " has more elements than any tensor can hold");
    n *= d;
  }
  return n;
}

// Copies each element of a repeated typed field into Out, the width the dtype stores.
template <class Out, class Field>
std::string narrow(const Field& field) {
  std::string bytes(static_cast<size_t>(field.size()) * sizeof(Out), '\0');
  for (int i = 0; i < field.size(); ++i) {
    Out v = static_cast<Out>(field.Get(i));
    std::memcpy(&bytes[static_cast<size_t>(i) * sizeof(Out)], &v, sizeof(Out));
  }
  return bytes;
}

// The typed-field storage rules of onnx.proto: 16- and 8-bit types (fp16/bf16 as bit patterns) are
// widened into int32_data, uint32 into uint64_data, complex numbers are pairs of floats/doubles.
std::string typed_field_bytes(const onnx::TensorProto& p, DType dtype, int64_t numel, const std::string& where) {
  int64_t have = 0, want = numel;
  std::string bytes;
  switch (dtype) {
    case DType::kComplex64: want = 2 * numel; [[fallthrough]];
    case DType::kFloat: have = p.float_data_size(); bytes = narrow<float>(p.float_data()); break;
    case DType::kComplex128: want = 2 * numel; [[fallthrough]];
    case DType::kDouble: have = p.double_data_size(); bytes = narrow<double>(p.double_data()); break;
    case DType::kInt64: have = p.int64_data_size(); bytes = narrow<int64_t>(p.int64_data()); break;
    case DType::kUInt64: have = p.uint64_data_size(); bytes = narrow<uint64_t>(p.uint64_data()); break;
    case DType::kUInt32: have = p.uint64_data_size(); bytes = narrow<uint32_t>(p.uint64_data()); break;
    case DType::kInt32: have = p.int32_data_size(); bytes = narrow<int32_t>(p.int32_data()); break;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: have = p.int32_data_size(); bytes = narrow<uint16_t>(p.int32_data()); break;
    case DType::kInt8:
    case DType::kUInt8: have = p.int32_data_size(); bytes = narrow<uint8_t>(p.int32_data()); break;
    case DType::kBool:
      have = p.int32_data_size();
      bytes.resize(static_cast<size_t>(have));
      for (int i = 0; i < p.int32_data_size(); ++i) bytes[static_cast<size_t>(i)] = p.int32_data(i) != 0;
      break;
    default: throw InputError(where + ": data type " + std::to_string(p.data_type()) + " cannot hold numbers");
  }
  if (have != want)
    throw InputError(where + " has " + std::to_string(have) + " values in its typed data field, its shape needs " +
                     std::to_string(want));
  return bytes;
}

int64_t parse_int(const std::string& text, const std::string& where) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw InputError(where + " is not a non-negative integer: '" + text + "'");
  return std::stoll(text);
}

ExternalLocation external_location(const onnx::TensorProto& p, const std::string& where) {
  ExternalLocation loc;
  bool has_location = false;
  for (const auto& entry : p.external_data()) {
    if (entry.key() == "location") {
      loc.location = entry.value();
      has_location = true;
    } else if (entry.key() == "offset") {
      loc.offset = parse_int(entry.value(), where + ": external data offset");
    } else if (entry.key() == "length") {
      loc.length = parse_int(entry.value(), where + ": external data length");
    } else if (entry.key() == "checksum") {
      loc.checksum = entry.value();
    }
  }
  if (!has_location) throw InputError(where + " is stored externally but names no location");
  return loc;
}

}  // namespace

Tensor tensor_from_proto(onnx::TensorProto& p, const std::string& model_path, ExternalDataReader& external) {
  const std::string where = model_path + ": tensor '" + p.name() + "'";
  if (p.data_type() == 0 || !is_valid_dtype(p.data_type()))
    throw InputError(where + " has no valid data type (" + std::to_string(p.data_type()) + ")");
  if (p.has_segment()) throw InputError(where + " is segmented, which is not supported");
  const DType dtype = static_cast<DType>(p.data_type());
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  const int64_t numel = checked_numel(dims, where);

  Tensor t;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    if (dtype == DType::kString) throw InputError(where + ": string tensors cannot be stored externally");
    t = external.view(p.name(), dtype, std::move(dims), external_location(p, where));
  } else if (dtype == DType::kString) {
    if (p.string_data_size() != numel)
      throw InputError(where + " has " + std::to_string(p.string_data_size()) + " strings, its shape needs " +
                       std::to_string(numel));
    t.dtype = dtype;
    t.dims = std::move(dims);
    t.strings.reserve(static_cast<size_t>(numel));
    for (auto& s : *p.mutable_string_data()) t.strings.push_back(std::move(s));
  } else if (p.has_raw_data()) {
    const uint64_t need = static_cast<uint64_t>(numel) * dtype_size(dtype);
    if (p.raw_data().size() != need)
      throw InputError(where + " has " + std::to_string(p.raw_data().size()) + " bytes of raw_data, its type and shape need " +
                       std::to_string(need));
    t = Tensor::from_bytes(dtype, std::move(dims), std::move(*p.mutable_raw_data()));
    p.clear_raw_data();
  } else {
    t = Tensor::from_bytes(dtype, std::move(dims), typed_field_bytes(p, dtype, numel, where));
  }
  t.name = p.name();
  t.doc_string = p.doc_string();
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto* p, ExternalDataWriter* external, size_t external_threshold) {
  p->set_name(t.name);
  p->set_data_type(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) p->add_dims(d);
  if (!t.doc_string.empty()) p->set_doc_string(t.doc_string);
  if (t.dtype == DType::kString) {
    for (const auto& s : t.strings) p->add_string_data(s);
    return;
  }
  const size_t nbytes = t.nbytes();
  if (external && external_threshold > 0 && nbytes >= external_threshold) {
    ExternalLocation where = external->append(t.data(), nbytes);
    p->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* entry = p->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", where.location);
    add("offset", std::to_string(where.offset));
    add("length", std::to_string(where.length));
    return;
  }
  p->set_raw_data(t.data(), nbytes);
}

}  // namespace amp
