#include "backends/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace amp {

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

ArenaPlan plan_arena(const std::vector<BufferLife>& buffers, size_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first; ties by first use so the result does not depend on the sort's whims.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes != buffers[b].bytes ? buffers[a].bytes > buffers[b].bytes
                                                : buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const BufferLife& b = buffers[i];
    const size_t size = align_up(b.bytes, alignment);
    if (size == 0) continue;
    // Occupied ranges of buffers live at the same time, by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j : placed) {
      const BufferLife& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(plan.offsets[j], align_up(o.bytes, alignment));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [start, len] : busy) {
      if (start >= offset + size) break;  // the gap before this range fits
      offset = std::max(offset, start + len);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(i);
    plan.total_bytes += size;
  }
  // Peak of live bytes over steps: sweep starts and ends.
  std::map<int64_t, int64_t> delta;
  for (const BufferLife& b : buffers) {
    delta[b.first] += static_cast<int64_t>(align_up(b.bytes, alignment));
    delta[b.last + 1] -= static_cast<int64_t>(align_up(b.bytes, alignment));
  }
  int64_t live = 0;
  for (const auto& [step, d] : delta) {
    live += d;
    plan.peak_bytes = std::max(plan.peak_bytes, static_cast<size_t>(live));
  }
  return plan;
}

}  // namespace amp
