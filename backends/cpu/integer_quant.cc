#include "backends/cpu/integer_quant.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {

void widen_minus_zero_point(const View& x, const View* zero_point, int64_t inner, int64_t extent, int32_t* out,
                            const char* what) {
  if (zero_point && zero_point->dtype != x.dtype)
    throw InputError(std::string(what) + "'s zero point is " + std::string(dtype_name(zero_point->dtype)) + " but " + what + " is " +
                     std::string(dtype_name(x.dtype)));
  const int64_t zn = zero_point ? zero_point->numel() : 0;
  if (zn > 1 && zn != extent)
    throw InputError(std::string(what) + "'s zero point has " + std::to_string(zn) + " elements, neither 1 nor " +
                     std::to_string(extent));
  dispatch(TypeList<uint8_t, int8_t>{}, x.dtype, [&](auto tag) {
    using X = typename decltype(tag)::type;
    const X* in = x.as<X>();
    const X* z = zero_point ? zero_point->as<X>() : nullptr;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      const int32_t zp = zn == 0 ? 0 : static_cast<int32_t>(z[zn == 1 ? 0 : i / inner % extent]);
      out[i] = static_cast<int32_t>(in[i]) - zp;
    }
  });
}

Scales::Scales(const View& scale, int64_t extent, const char* what) : values(scale.as<float>()), per_tensor(scale.numel() == 1) {
  if (scale.dtype != DType::kFloat) throw InputError(std::string(what) + " must be float32, not " + std::string(dtype_name(scale.dtype)));
  if (!per_tensor && scale.numel() != extent)
    throw InputError(std::string(what) + " has " + std::to_string(scale.numel()) + " elements, neither 1 nor " +
                     std::to_string(extent));
}

void requantize(int32_t acc, float multiplier, int32_t zero_point, DType out_type, void* out, int64_t i) {
  // nearbyint: round half to even in the default rounding mode.
  double v = std::nearbyint(static_cast<double>(acc) * static_cast<double>(multiplier)) + zero_point;
  if (out_type == DType::kUInt8) {
    static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, v)));
  } else if (out_type == DType::kInt8) {
    static_cast<int8_t*>(out)[i] = static_cast<int8_t>(std::min(127.0, std::max(-128.0, v)));
  } else {
    throw InputError("the output's zero point must be int8 or uint8, not " + std::string(dtype_name(out_type)));
  }
}

int32_t scalar_zero_point(const View* zero_point, const char* what) {
  if (!zero_point) return 0;
  if (zero_point->numel() != 1)
    throw InputError(std::string(what) + " must have one element, it has " + std::to_string(zero_point->numel()));
  if (zero_point->dtype == DType::kUInt8) return zero_point->as<uint8_t>()[0];
  if (zero_point->dtype == DType::kInt8) return zero_point->as<int8_t>()[0];
  throw InputError(std::string(what) + " must be int8 or uint8, not " + std::string(dtype_name(zero_point->dtype)));
}

}  // namespace amp::cpu
