// Where a plan's values live on the device, decided without a device (so tests check it here):
// one arena laid out by liveness over the units' run order (backends/memory_plan.h).
//
// In the arena: every unit output from its first writer to its last reader, every fed value the
// device reads for the whole run, and a staging copy of each fetched state value (taken after the
// last unit, before the updates overwrite state). A view (ShapePlan::views) has no buffer of its
// own: its readers, fetches and updates keep its root alive instead. Outside the arena: state
// (persistent buffers), initializers (uploaded once per executable) and other host-known values
// the device reads (uploaded once per plan).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cuda/schedule.h"
#include "backends/memory_plan.h"

namespace amp::cuda {

struct DeviceLayout {
  ArenaPlan arena;
  std::vector<int64_t> offset;   // per value: its offset in the arena, -1 when it has none there
  std::vector<bool> on_device;   // per value: a device unit or a state update reads it (views included)
  std::vector<std::pair<int, size_t>> state_fetches;  // fetched state value -> offset of its staging copy
  int64_t end = 0;               // the position after the last unit: fetches and updates read there
  std::vector<int64_t> first_write, last_read;  // per value, in run positions (-1: never)
};

// Per position of p.order, for a unit whose work goes on running on a stream of its own
// (beside[pos], PreparedOp::completion): the position of the first unit that reads one of its
// outputs (or a view of one), where the step's stream waits for it; the position after the last
// unit when none does. -1 for the other units.
std::vector<int64_t> join_positions(const ShapePlan& p, const std::vector<bool>& beside);

// fed: per value, whether it is fed this run; fetches: the values copied out; beside: per position
// of p.order, whether the unit runs beside the step's stream (its inputs and outputs then keep
// their buffers until its join, as no later unit may write them while it reads and writes them).
DeviceLayout layout_device_memory(const Schedule& s, const ShapePlan& p, const std::vector<const Tensor*>& fed,
                                  const std::vector<int>& fetches, size_t alignment,
                                  const std::vector<bool>& beside = {});

}  // namespace amp::cuda
