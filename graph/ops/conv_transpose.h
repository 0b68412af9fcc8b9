// ConvTranspose's geometry (ONNX opset 11-17): kernel, strides, dilations, output_padding, pads and
// output extents per spatial dim. The output extent is S*(I-1) + output_padding + (K-1)*D + 1 - pads
// unless output_shape or auto_pad (SAME_*: O = I*S) fixes it; then the total padding is
// S*(I-1) + output_padding + (K-1)*D + 1 - O (at least 0: a larger output only gains zeros at the
// end), split with the odd one at the end for SAME_UPPER and NOTSET, at the start for SAME_LOWER
// (as libonnx-testdata's node tests expect). The shape rule, the CPU kernel and the gradient rule
// all resolve the geometry here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/node.h"

namespace amp {

struct TransposedWindow {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output_padding;
  std::vector<int64_t> in, out;  // spatial extents of X and Y
};

struct ConvTransposeAttrs {
  std::string auto_pad;
  std::vector<int64_t> kernel, strides, dilations, pads, output_padding, output_shape;
  int64_t group = 1;
  explicit ConvTransposeAttrs(const Node& n);
};

// Resolves the geometry for X's spatial extents `in` and W's kernel extents `kernel`. InputError
// when the attributes contradict each other or the inputs.
TransposedWindow make_transposed_window(const ConvTransposeAttrs& a, const std::vector<int64_t>& in,
                                        const std::vector<int64_t>& kernel);

}  // namespace amp
