#include "graph/ops/conv_transpose.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/type.h"

namespace amp {

ConvTransposeAttrs::ConvTransposeAttrs(const Node& n)
    : auto_pad(n.attr_string("auto_pad", "NOTSET")),
      kernel(n.attr_ints("kernel_shape")),
      strides(n.attr_ints("strides")),
      dilations(n.attr_ints("dilations")),
      pads(n.attr_ints("pads")),
      output_padding(n.attr_ints("output_padding")),
      output_shape(n.attr_ints("output_shape")),
      group(n.attr_int("group", 1)) {}

TransposedWindow make_transposed_window(const ConvTransposeAttrs& a, const std::vector<int64_t>& in,
                                        const std::vector<int64_t>& kernel) {
  const size_t r = in.size();
  TransposedWindow w;
  w.in = in;
  w.kernel = kernel;
  if (!a.kernel.empty() && a.kernel != kernel)
    throw InputError("kernel_shape " + Shape::of(a.kernel).str() + " does not match W's kernel " + Shape::of(kernel).str());
  if (kernel.size() != r)
    throw InputError("W has " + std::to_string(kernel.size()) + " kernel dims, X has " + std::to_string(r) + " spatial dims");
  w.strides = a.strides.empty() ? std::vector<int64_t>(r, 1) : a.strides;
  w.dilations = a.dilations.empty() ? std::vector<int64_t>(r, 1) : a.dilations;
  w.output_padding = a.output_padding.empty() ? std::vector<int64_t>(r, 0) : a.output_padding;
  if (w.strides.size() != r || w.dilations.size() != r || w.output_padding.size() != r)
    throw InputError("strides, dilations or output_padding have the wrong rank");
  if (!a.pads.empty() && a.pads.size() != 2 * r) throw InputError("pads must have 2 values per spatial dim");
  // output_shape may name the spatial extents only or N and C too.
  const std::vector<int64_t> fixed(a.output_shape.begin() + (a.output_shape.size() == r + 2 ? 2 : 0), a.output_shape.end());
  if (!fixed.empty() && fixed.size() != r)
    throw InputError("output_shape " + Shape::of(a.output_shape).str() + " does not match " + std::to_string(r) + " spatial dims");
  const bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
  if (!same && a.auto_pad != "NOTSET" && a.auto_pad != "VALID") throw InputError("unknown auto_pad '" + a.auto_pad + "'");
  w.pads_begin.assign(r, 0);
  w.pads_end.assign(r, 0);
  w.out.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t s = w.strides[i], d = w.dilations[i], k = kernel[i];
    if (s <= 0 || d <= 0 || k <= 0) throw InputError("strides, dilations and kernel must be positive");
    if (w.output_padding[i] < 0 || (w.output_padding[i] >= s && w.output_padding[i] >= d))
      throw InputError("output_padding " + Shape::of(w.output_padding).str() + " must be below the stride or the dilation");
    const int64_t full = s * (in[i] - 1) + w.output_padding[i] + (k - 1) * d + 1;
    if (!fixed.empty() || same) {
      w.out[i] = !fixed.empty() ? fixed[i] : in[i] * s;
      const int64_t total = std::max<int64_t>(0, full - w.out[i]);
      w.pads_begin[i] = a.auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
    } else {
      if (a.auto_pad == "NOTSET" && !a.pads.empty()) {
        w.pads_begin[i] = a.pads[i];
        w.pads_end[i] = a.pads[i + r];
      }
      w.out[i] = full - w.pads_begin[i] - w.pads_end[i];
    }
    if (w.out[i] <= 0 || w.pads_begin[i] < 0 || w.pads_end[i] < 0)
      throw InputError("ConvTranspose's output " + Shape::of(w.out).str() + " is empty or its pads are negative (input " +
                       Shape::of(in).str() + ", kernel " + Shape::of(kernel).str() + ")");
  }
  return w;
}

}  // namespace amp
