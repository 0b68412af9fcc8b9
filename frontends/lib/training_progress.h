// What a training run shows while it runs: on a terminal, one line redrawn in place (bar, step/total,
// loss, samples/s, loss scale, skipped steps, ETA), never wider than the terminal; otherwise (logs,
// CI) a plain spdlog line every `every` steps and at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace amp {

class TrainingProgress {
 public:
  // `total`: optimizer steps of the run; `quiet`: nothing at all; `label`: put before every line
  // ("fp32" for the first run of --compare-fp32).
  TrainingProgress(int64_t total, bool quiet, std::string label);
  // After each optimizer step; `loss_scale` is 0 without loss scaling, `skipped` counts the run's
  // skipped steps so far.
  void step(int64_t done, double loss, double samples_per_second, double loss_scale, int64_t skipped);
  // A line that must not be overdrawn (validation results), printed above the progress line.
  void note(const std::string& line);
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  bool quiet_, tty_;
  std::string prefix_;
  int64_t every_;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now(), last_draw_;
};

}  // namespace amp
