// What this device's libraries accepted and refused, for the first runs on a device nobody has
// tried: the stand-ins the CI tests run against were written from the same reading of NVIDIA's
// documentation as the backend, so only a device says which epilogues, algorithms and fused calls
// its cuBLASLt and cuDNN take. When AMP_CUDA_REPORT names a file, every decision the backend takes
// from a library's answer is appended to it as one JSON line: the epilogue a product runs with and
// why cuBLASLt refused a better one, the convolution algorithm cuDNN ran per shape and the ones it
// refused, whether cuDNN took a fused convolution, what the ReLU-mask probe found. Each line names
// the unit (its first node and kind) it was taken for. .ci/gpu_run.sh sets it and summarises the
// lines (.ci/device_report.py). Unset, nothing is recorded or formatted.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace amp::cuda {

class DeviceReport {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  DeviceReport();  // AMP_CUDA_REPORT, read once
  bool enabled() const { return !path_.empty(); }
  // One line: {"event": event, "unit": ..., "kind": ..., fields...}. Thread-safe; each line is
  // flushed, so a run that fails later still leaves what it found.
  void record(const std::string& event, const Fields& fields);

  // The unit whose decisions this thread records while the scope lives (prepare and enqueue).
  class UnitScope {
   public:
    UnitScope(const std::string& where, const std::string& kind);
    ~UnitScope();
    UnitScope(const UnitScope&) = delete;
    UnitScope& operator=(const UnitScope&) = delete;

   private:
    const std::string* where_;
    const std::string* kind_;
  };

 private:
  std::string path_;
  std::mutex mutex_;
};

}  // namespace amp::cuda
