// Element types as the CPU kernels see them. fp16 and bf16 are stored as 16 bits (f16, bf16 below)
// and computed in fp32: a kernel loads each element into compute_t<T>, does its math there and
// stores the result rounded to nearest-even, which is what a GPU's half/bfloat kernels do
// (load, fp32 math, cvt.rn on store). Kernels are templates over the storage type; dispatch()
// turns a runtime DType into one template instantiation, once per node and run, never per element.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/half.h"

namespace amp::cpu {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

// Compute type and load / store for each storage type.
template <class T>
struct Num {
  using C = T;
  static C load(T v) { return v; }
  static T store(C v) { return v; }
};
// Every fp16 value's fp32 bits, indexed by its bits (256 KiB of constants, made by the compiler):
// a scalar fp16 load in the kernels' per-element loops is one table read instead of half.h's bit
// manipulation (bulk conversions use convert.h's vector instructions instead). Integer-only, so
// it is a constant expression; tests/backends compare it with half.h's fp16_to_fp32 for all values.
constexpr uint32_t fp16_bits_to_fp32_bits(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 31) return sign | 0x7f800000u | (m << 13);
  if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0) return sign;
  uint32_t exp = 113;  // a subnormal m * 2^-24: normalise the mantissa
  while (!(m & 0x400u)) {
    m <<= 1;
    --exp;
  }
  return sign | (exp << 23) | ((m & 0x3ffu) << 13);
}

struct Fp16Table {
  uint32_t bits[65536];
  constexpr Fp16Table() : bits() {
    for (uint32_t h = 0; h < 65536; ++h) bits[h] = fp16_bits_to_fp32_bits(h);
  }
};
inline constexpr Fp16Table kFp16Table{};

template <>
struct Num<f16> {
  using C = float;
  static float load(f16 v) { return bits_float(kFp16Table.bits[v.bits]); }
  static f16 store(float v) { return f16{fp32_to_fp16(v)}; }
};
template <>
struct Num<bf16> {
  using C = float;
  static float load(bf16 v) { return bf16_to_fp32(v.bits); }
  static bf16 store(float v) { return bf16{fp32_to_bf16(v)}; }
};
template <>
struct Num<bool> {
  using C = bool;
  static bool load(bool v) { return v; }
  static bool store(bool v) { return v; }
};

template <class T>
using compute_t = typename Num<T>::C;
template <class T>
inline compute_t<T> load(T v) {
  return Num<T>::load(v);
}
template <class T>
inline T store(compute_t<T> v) {
  return Num<T>::store(v);
}

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// float64 -> fp16/bf16 in one rounding, as numpy's astype does: rounding to fp32 first could round
// twice. Rounding to fp32 "to odd" (inexact results get their last bit set) keeps the sticky
// information, and fp32 has enough extra bits for the second rounding to then be exact.
inline float double_to_float_round_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  if (back == d || d != d) return f;  // exact (infinities included) or NaN
  uint32_t u = float_bits(f);
  if (std::fabs(back) > std::fabs(d)) --u;  // rounded away from zero: one ulp back (inf -> the largest float)
  return bits_float(u | 1u);
}

// Any element type converted to any other, the way ONNX Cast and numpy astype do.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) {
    if constexpr (std::is_same_v<From, double>)
      return store<To>(double_to_float_round_odd(v));
    else
      return store<To>(static_cast<float>(load(v)));
  } else if constexpr (std::is_same_v<To, bool>) {
    return load(v) != 0;
  } else {
    return static_cast<To>(load(v));
  }
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat;
  else if constexpr (std::is_same_v<T, double>) return DType::kDouble;
  else if constexpr (std::is_same_v<T, f16>) return DType::kFloat16;
  else if constexpr (std::is_same_v<T, bf16>) return DType::kBFloat16;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::kUInt8;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::kUInt16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::kUInt32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::kUInt64;
  else if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  else static_assert(sizeof(T) == 0, "not an element type");
}

template <class... Ts>
struct TypeList {
  static constexpr uint32_t mask() { return ((1u << static_cast<int>(dtype_of<Ts>())) | ... | 0u); }
};
template <class A, class B>
struct JoinTypes;
template <class... A, class... B>
struct JoinTypes<TypeList<A...>, TypeList<B...>> {
  using type = TypeList<A..., B...>;
};

using FloatTypes = TypeList<float, f16, bf16, double>;
using SignedIntTypes = TypeList<int8_t, int16_t, int32_t, int64_t>;
using IntTypes = TypeList<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
using NumericTypes = JoinTypes<FloatTypes, IntTypes>::type;
using AllTypes = JoinTypes<NumericTypes, TypeList<bool>>::type;
using SignedTypes = JoinTypes<FloatTypes, SignedIntTypes>::type;

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) for the T of list whose DType is t; InputError when t is not in the list.
template <class... Ts, class F>
void dispatch(TypeList<Ts...>, DType t, F&& f) {
  bool done = ((t == dtype_of<Ts>() ? (f(Tag<Ts>{}), true) : false) || ...);
  if (!done) throw InputError("element type " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace amp::cpu
