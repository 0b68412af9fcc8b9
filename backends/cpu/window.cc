#include "backends/cpu/window.h"

#include "backends/cpu/kernel_util.h"

namespace amp::cpu {

Window3::Window3(const Window& w) {
  const size_t r = w.in.size(), shift = 3 - r;
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= shift;
    const size_t j = i - shift;
    in[i] = real ? w.in[j] : 1;
    out[i] = real ? w.out[j] : 1;
    k[i] = real ? w.kernel[j] : 1;
    s[i] = real ? w.strides[j] : 1;
    d[i] = real ? w.dilations[j] : 1;
    pb[i] = real ? w.pads_begin[j] : 0;
    pe[i] = real ? w.pads_end[j] : 0;
  }
}

Window conv_window(const WindowAttrs& a, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& w_dims) {
  std::vector<int64_t> in(x_dims.begin() + 2, x_dims.end()), k(w_dims.begin() + 2, w_dims.end());
  if (!a.kernel.empty() && a.kernel != k)
    throw InputError("kernel_shape " + dims_str(a.kernel) + " does not match W " + dims_str(w_dims));
  return make_window(a, in, k);
}

}  // namespace amp::cpu
