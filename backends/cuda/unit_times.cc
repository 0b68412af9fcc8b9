#include "backends/cuda/unit_times.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_report.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

std::string fixed(double v, int digits) {
  char buffer[64];
  const auto r = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::fixed, digits);
  return std::string(buffer, r.ptr);
}

}  // namespace

uint64_t unit_times_run() {
  const char* v = std::getenv("AMP_CUDA_UNIT_TIMES");
  if (!v || !*v) return 0;
  uint64_t k = 0;
  const char* end = v + std::char_traits<char>::length(v);
  const auto r = std::from_chars(v, end, k);
  return r.ec == std::errc() && r.ptr == end ? k : 0;
}

UnitTimes::UnitTimes(size_t marks) {
  events_.reserve(marks);
  for (size_t i = 0; i < marks; ++i) {
    cudaEvent_t e = nullptr;
    const cudaError_t status = cudaEventCreate(&e);
    if (status != cudaSuccess) {
      for (cudaEvent_t made : events_) cudaEventDestroy(made);
      AMP_CUDA_CHECK(status);
    }
    events_.push_back(e);
  }
}

UnitTimes::~UnitTimes() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void UnitTimes::mark(size_t i, cudaStream_t stream) { AMP_CUDA_CHECK(cudaEventRecord(events_.at(i), stream)); }

std::vector<float> UnitTimes::intervals() const {
  std::vector<float> ms;
  if (events_.empty()) return ms;
  AMP_CUDA_CHECK(cudaEventSynchronize(events_.back()));
  for (size_t i = 0; i + 1 < events_.size(); ++i) {
    float t = 0.0f;
    AMP_CUDA_CHECK(cudaEventElapsedTime(&t, events_[i], events_[i + 1]));
    ms.push_back(t);
  }
  return ms;
}

void record_unit_times(const std::vector<TimedUnit>& units, const std::vector<float>& intervals, uint64_t run,
                       DeviceReport& report) {
  if (intervals.size() != units.size() + 1)
    throw Error("internal: one interval per timed unit and one for the step's end expected");
  double sum = 0.0;
  for (size_t i = 0; i < units.size(); ++i) {
    const TimedUnit& u = units[i];
    const double ms = intervals[i];
    sum += ms;
    const DeviceReport::UnitScope scope(u.where, u.kind);
    DeviceReport::Fields fields = {{"run", std::to_string(run)},
                                   {"position", std::to_string(i)},
                                   {"ms", fixed(ms, 4)},
                                   {"bytes", std::to_string(u.bytes)},
                                   {"GB/s", ms > 0.0 ? fixed(static_cast<double>(u.bytes) / (ms * 1e6), 1) : "-"}};
    if (u.beside) fields.emplace_back("beside", "1");
    report.record("unit_time", fields);
  }
  const double after = intervals.back();
  report.record("unit_times", {{"run", std::to_string(run)},
                               {"units", std::to_string(units.size())},
                               {"units ms", fixed(sum, 3)},
                               {"after units ms", fixed(after, 3)},
                               {"step ms", fixed(sum + after, 3)}});
}

}  // namespace amp::cuda
