#include "graph/ops/window.h"

#include <algorithm>

#include "graph/error.h"

namespace amp {
namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

WindowAttrs::WindowAttrs(const Node& n)
    : auto_pad(n.attr_string("auto_pad", "NOTSET")),
      kernel(n.attr_ints("kernel_shape")),
      strides(n.attr_ints("strides")),
      dilations(n.attr_ints("dilations")),
      pads(n.attr_ints("pads")),
      ceil_mode(n.attr_int("ceil_mode", 0) != 0) {}

Window make_window(const WindowAttrs& a, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel) {
  const size_t r = in.size();
  Window w;
  w.in = in;
  w.kernel = kernel.empty() ? a.kernel : kernel;
  if (w.kernel.size() != r) throw InputError("kernel_shape has " + std::to_string(w.kernel.size()) +
                                             " dims, the input has " + std::to_string(r) + " spatial dims");
  w.strides = a.strides.empty() ? std::vector<int64_t>(r, 1) : a.strides;
  w.dilations = a.dilations.empty() ? std::vector<int64_t>(r, 1) : a.dilations;
  if (w.strides.size() != r || w.dilations.size() != r) throw InputError("strides or dilations have the wrong rank");
  if (!a.pads.empty() && a.pads.size() != 2 * r) throw InputError("pads must have 2 values per spatial dim");
  w.pads_begin.assign(r, 0);
  w.pads_end.assign(r, 0);
  w.out.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1, s = w.strides[i];
    if (s <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0) throw InputError("strides, dilations and kernel must be positive");
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      w.out[i] = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * s + span - in[i]);
      const int64_t small = total / 2, big = total - small;
      w.pads_begin[i] = a.auto_pad == "SAME_UPPER" ? small : big;
      w.pads_end[i] = total - w.pads_begin[i];
      continue;
    }
    if (a.auto_pad == "NOTSET" && !a.pads.empty()) {
      w.pads_begin[i] = a.pads[i];
      w.pads_end[i] = a.pads[i + r];
    } else if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID") {
      throw InputError("unknown auto_pad '" + a.auto_pad + "'");
    }
    const int64_t room = in[i] + w.pads_begin[i] + w.pads_end[i] - span;
    if (room < 0) throw InputError("the window " + dims_text(w.kernel) + " does not fit the input " + dims_text(in));
    w.out[i] = (a.ceil_mode ? (room + s - 1) / s : room / s) + 1;
    // A last window that would start in the end padding is dropped (ONNX and PyTorch agree).
    if (a.ceil_mode && (w.out[i] - 1) * s >= in[i] + w.pads_begin[i]) --w.out[i];
  }
  return w;
}

}  // namespace amp
