#include "graph/fast_math.h"

namespace amp {

#define AMP_FAST_MATH_STR(...) #__VA_ARGS__
#define AMP_FAST_MATH_XSTR(...) AMP_FAST_MATH_STR(__VA_ARGS__)

const char* fast_math_source() {
  static const char* const text =
      AMP_FAST_MATH_XSTR(AMP_FAST_MATH_FUNCTIONS(__device__ __forceinline__, __float_as_uint, __uint_as_float)) "\n";
  return text;
}

}  // namespace amp
