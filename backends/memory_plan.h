// Static memory planning shared by the backends: given buffers with sizes and lifetimes (the
// first and last step that touch them), place them at offsets in one arena so that buffers whose
// lifetimes overlap never share bytes. Placement is greedy, largest first, each at the lowest
// offset that fits between the already placed buffers it overlaps in time (the strategy of
// TFLite's arena planner): simple, and near the lower bound (the peak of live bytes) in practice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace amp {

struct BufferLife {
  size_t bytes = 0;
  int64_t first = 0;  // step that writes it first
  int64_t last = 0;   // step that reads it last (inclusive)
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // per buffer, aligned
  size_t arena_bytes = 0;       // the arena needed
  size_t peak_bytes = 0;        // the most bytes live at one step: no plan can do better
  size_t total_bytes = 0;       // sum of all buffers: the arena without reuse
};

// Offsets are multiples of `alignment` (64: a cache line, and enough for any vector load).
ArenaPlan plan_arena(const std::vector<BufferLife>& buffers, size_t alignment = 64);

}  // namespace amp
