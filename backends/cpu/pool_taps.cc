#include "backends/cpu/pool_taps.h"

#include <algorithm>

namespace amp::cpu {

std::vector<Tap> taps_of(const Window3& w, int dim) {
  const int64_t k = w.k[dim], d = w.d[dim], extent = w.in[dim];
  auto first_at_or_after = [&](int64_t origin, int64_t limit) {  // first tap t with origin + t*d >= limit
    return origin >= limit ? 0 : (limit - origin + d - 1) / d;
  };
  std::vector<Tap> taps;
  taps.reserve(static_cast<size_t>(w.out[dim]));
  for (int64_t o = 0; o < w.out[dim]; ++o) {
    const int64_t origin = o * w.s[dim] - w.pb[dim];
    const int64_t hi = std::min(k, first_at_or_after(origin, extent));
    const int64_t lo = std::min(hi, first_at_or_after(origin, 0));
    const int64_t padded_hi = std::min(k, first_at_or_after(origin, extent + w.pe[dim]));
    const int64_t padded_lo = std::min(padded_hi, first_at_or_after(origin, -w.pb[dim]));
    taps.push_back({origin, lo, hi, padded_hi - padded_lo});
  }
  return taps;
}

InteriorRange interior_of(const std::vector<Tap>& taps, int64_t k) {
  InteriorRange r;
  const int64_t n = static_cast<int64_t>(taps.size());
  while (r.begin < n && !(taps[static_cast<size_t>(r.begin)].lo == 0 && taps[static_cast<size_t>(r.begin)].hi == k)) ++r.begin;
  r.end = r.begin;
  while (r.end < n && taps[static_cast<size_t>(r.end)].lo == 0 && taps[static_cast<size_t>(r.end)].hi == k) ++r.end;
  if (r.begin < n) r.origin = taps[static_cast<size_t>(r.begin)].origin;
  return r;
}

}  // namespace amp::cpu
