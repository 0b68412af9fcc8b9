// Element types of ONNX tensors. The numeric values are TensorProto.DataType's, so a DType converts
// to and from the protobuf enum with a plain cast and the IR never needs a translation table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace amp {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined and kString (strings have no fixed size).
size_t dtype_size(DType t);
// Short lower-case name as ONNX spells it in type strings: "float", "float16", "bfloat16", "int64".
std::string_view dtype_name(DType t);
// Inverse of dtype_name; also accepts the short forms "fp32", "fp16", "bf16", "fp64".
std::optional<DType> dtype_from_name(std::string_view name);
// True for float16, bfloat16, float and double: the types mixed precision moves between.
bool is_floating(DType t);
// True for float16 and bfloat16.
bool is_low_precision(DType t);
bool is_valid_dtype(int32_t raw);

}  // namespace amp
