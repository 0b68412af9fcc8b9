#include "graph/dtype.h"

#include <array>

namespace amp {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 17> kInfo = {{
    {DType::kUndefined, "undefined", 0},
    {DType::kFloat, "float", 4},
    {DType::kUInt8, "uint8", 1},
    {DType::kInt8, "int8", 1},
    {DType::kUInt16, "uint16", 2},
    {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kString, "string", 0},
    {DType::kBool, "bool", 1},
    {DType::kFloat16, "float16", 2},
    {DType::kDouble, "double", 8},
    {DType::kUInt32, "uint32", 4},
    {DType::kUInt64, "uint64", 8},
    {DType::kComplex64, "complex64", 8},
    {DType::kComplex128, "complex128", 16},
    {DType::kBFloat16, "bfloat16", 2},
}};

const DTypeInfo& info(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kInfo.size() ? kInfo[i] : kInfo[0];
}

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kFloat;
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  if (name == "fp64" || name == "float64") return DType::kDouble;
  for (const auto& i : kInfo)
    if (i.name == name && i.type != DType::kUndefined) return i.type;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kDouble;
}

bool is_low_precision(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

bool is_valid_dtype(int32_t raw) { return raw > 0 && raw < static_cast<int32_t>(kInfo.size()); }

}  // namespace amp
