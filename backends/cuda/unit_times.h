// Where a step's device time goes, unit by unit, without a profiler: AMP_CUDA_UNIT_TIMES=K runs
// the K-th run of each plan (counting from 1) with its launches enqueued one by one, as the runs
// before capture are, an event recorded on the step's stream before the first unit and after each
// one, and writes to the device report (AMP_CUDA_REPORT) one "unit_time" line per unit — its node
// and kind, position, milliseconds between its events, the bytes it reads and writes by the plan
// and the bandwidth that makes — and one "unit_times" line for the run: units, their sum, the
// step from its first event to its last (the state updates after the last unit included).
// A unit that leaves work on a stream of its own (completion(), a data-parallel AllReduce) is
// marked "beside": its events time only what the step's stream did for it. The run is not
// captured; runs after it are, as usual. ncu times each kernel alone and a ResNet-sized step under
// it takes minutes; this costs a few microseconds a unit and names graph nodes, not kernels.
// Unset, or without a report to write to, nothing changes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace amp::cuda {

class DeviceReport;

// K of AMP_CUDA_UNIT_TIMES=K (read at each run), 0 when unset or not a positive number.
uint64_t unit_times_run();

class UnitTimes {
 public:
  // `marks` events: one before the first unit and one after each unit, then one after the step.
  explicit UnitTimes(size_t marks);
  ~UnitTimes();
  UnitTimes(const UnitTimes&) = delete;
  UnitTimes& operator=(const UnitTimes&) = delete;

  // Records event `i` on `stream`.
  void mark(size_t i, cudaStream_t stream);
  // Milliseconds between event i and i + 1, for each i; once the stream has passed the last one.
  std::vector<float> intervals() const;

 private:
  std::vector<cudaEvent_t> events_;
};

// What the report says of one timed unit.
struct TimedUnit {
  std::string where, kind;
  uint64_t bytes = 0;
  bool beside = false;
};

// The report's lines for run `run`: per unit its interval (intervals[i] for units[i]) and the
// run's totals; intervals holds one more (the last unit to the end of the step).
void record_unit_times(const std::vector<TimedUnit>& units, const std::vector<float>& intervals, uint64_t run,
                       DeviceReport& report);

}  // namespace amp::cuda
