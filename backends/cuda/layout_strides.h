// The element strides of a packed tensor in ONNX's layout or channels-last (channels_last.h), per
// dim in ONNX's order [N, C, spatial...]: what TensorDesc::strides(), the cuDNN descriptors and
// the cuDNN graphs all describe a value by.
#pragma once

#include <cstdint>
#include <vector>

namespace amp::cuda {

// Row-major in dims' order; channels-last (3 dims and more): N, spatial..., C in memory.
inline std::vector<int64_t> layout_strides(const std::vector<int64_t>& dims, bool channels_last) {
  std::vector<int64_t> s(dims.size(), 1);
  if (!channels_last || dims.size() < 3) {
    for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
    return s;
  }
  int64_t step = dims[1];
  for (size_t d = dims.size(); d-- > 2;) {
    s[d] = step;
    step *= dims[d];
  }
  s[0] = step;
  return s;
}

}  // namespace amp::cuda
