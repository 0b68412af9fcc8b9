// Bulk fp16 / bf16 <-> fp32 conversion for the 16-bit paths of the kernels (products widen their
// operands, elementwise ops work on blocks). Bit-identical to graph/half.h — round to nearest even,
// overflow to inf, subnormals, NaN kept quiet — but with the F16C unit, 8 elements per instruction,
// when the CPU has it (every x86 CPU since 2012; checked once): element by element, half.h's
// conversions cost ~5 ns per fp16 value, six times an fp32 forward.
#pragma once

#include <cstdint>

#include "backends/cpu/numeric.h"

namespace amp::cpu {

void widen(const f16* in, float* out, int64_t n);
void widen(const bf16* in, float* out, int64_t n);
void narrow(const float* in, f16* out, int64_t n);
void narrow(const float* in, bf16* out, int64_t n);

}  // namespace amp::cpu
