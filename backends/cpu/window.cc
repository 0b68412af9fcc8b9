#include "backends/cpu/window.h"

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

}  // namespace amp::cpu
