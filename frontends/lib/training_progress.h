// What a training run shows while it runs: on a terminal, one progress line redrawn in place (bar,
// step, loss, rate, ETA); otherwise (logs, CI) a plain spdlog line every `every` steps and at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace amp {

class TrainingProgress {
 public:
  // `total`: optimizer steps of the run; `quiet`: nothing at all (amp-train --compare-fp32's runs).
  TrainingProgress(int64_t total, bool quiet);
  // After each optimizer step; `samples` counts samples trained so far in this process.
  void step(int64_t done, double loss, double samples_per_second, double loss_scale, int64_t skipped);
  // A line that must not be overdrawn (validation results), printed above the bar.
  void note(const std::string& line);
  void finish();

 private:
  int64_t total_;
  bool quiet_, tty_;
  int64_t every_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace amp
