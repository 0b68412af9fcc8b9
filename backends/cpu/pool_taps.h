// The taps of a pooling window as the pool kernels and their gradients walk it: for each output
// coordinate of each dim, where its window starts and which kernel taps land inside the input, so
// the loops have neither bounds checks nor divisions; and the arg-max rule that MaxPool's Indices
// and MaxPoolGrad share (the first maximum; a NaN wins, the last one if several, as in PyTorch).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernel_util.h"
#include "backends/cpu/window.h"

namespace amp::cpu {

// One output coordinate of one dim: its window starts at `origin` in the input, taps [lo, hi) land
// inside the input, and `padded` taps inside input plus pads (count_include_pad's divisor).
struct Tap {
  int64_t origin, lo, hi, padded;
};

// The taps of every output coordinate of dim `dim` (0 to 2) of w.
std::vector<Tap> taps_of(const Window3& w, int dim);

// The taps of all three dims of w.
struct WindowTaps {
  std::vector<Tap> dim[3];
  explicit WindowTaps(const Window3& w) : dim{taps_of(w, 0), taps_of(w, 1), taps_of(w, 2)} {}
};

// The outputs [begin, end) of one dim whose window has all k taps inside the input (none when the
// window never fits), and where the first of them starts: output begin + i starts at
// origin + i * stride.
struct InteriorRange {
  int64_t begin = 0, end = 0, origin = 0;
  int64_t size() const { return end - begin; }
};
InteriorRange interior_of(const std::vector<Tap>& taps, int64_t k);

// Calls f(out_index, tap z, tap y, tap x) for each output position of one plane, in order.
template <class F>
void for_each_output(const WindowTaps& taps, F&& f) {
  int64_t o = 0;
  for (const Tap& z : taps.dim[0])
    for (const Tap& y : taps.dim[1])
      for (const Tap& x : taps.dim[2]) f(o++, z, y, x);
}

// The maximum of one window of `plane` (w.in_size() elements) and its row-major offset in the
// plane: the first maximum, or the last NaN if there is one; offset -1 for a window with no tap
// inside the input. Selects rather than branches: on real data "is this the new max" is a coin flip.
template <class T, class C = compute_t<T>>
int64_t window_argmax(const T* plane, const Window3& w, const Tap& tz, const Tap& ty, const Tap& tx, C* best) {
  C b = 0;
  int64_t arg = -1;
  for (int64_t i = tz.lo; i < tz.hi; ++i) {
    const int64_t z = tz.origin + i * w.d[0];
    for (int64_t j = ty.lo; j < ty.hi; ++j) {
      const int64_t row = (z * w.in[1] + ty.origin + j * w.d[1]) * w.in[2];
      for (int64_t l = tx.lo; l < tx.hi; ++l) {
        const int64_t at = row + tx.origin + l * w.d[2];
        const C v = load(plane[at]);
        const bool take = (arg < 0) | (v > b) | (v != v);
        b = take ? v : b;
        arg = take ? at : arg;
      }
    }
  }
  *best = b;
  return arg;
}

}  // namespace amp::cpu
