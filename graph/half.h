// fp32 <-> fp16 / bf16 conversion, bit-exact with what a GPU's cvt.rn instructions and numpy do:
// round to nearest, ties to even; fp16 overflows to inf at 65520 (the midpoint past 65504);
// subnormals are produced and read back; NaN stays a quiet NaN with its sign. Inline because the
// CPU backend converts every element of every low-precision tensor through these.
#pragma once

#include <cstdint>
#include <cstring>

namespace amp {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf, or NaN made quiet with its top payload bits kept
    return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past 65504
  if (a < 0x38800000u) {                         // below 2^-14: fp16 subnormal or zero
    if (a < 0x33000000u) return sign;            // <= 2^-25 (a tie at 2^-25 goes to even 0)
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value in units of 2^-24 is m >> shift
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = (a - 0x38000000u) >> 13;  // rebias the exponent from 127 to 15
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(r);
}

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24, exact
    return bits_float(float_bits(v) | sign);
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // overflow carries to inf
}

inline float bf16_to_fp32(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// fp32 value after a round trip through the 16-bit type: what a GPU stores and reads back.
inline float round_fp16(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }
inline float round_bf16(float f) { return bf16_to_fp32(fp32_to_bf16(f)); }

constexpr float kFp16Max = 65504.0f;

}  // namespace amp
