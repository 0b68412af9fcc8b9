// Where a CPU run's time goes: with AMP_PROFILE=1 in the environment, every kernel launch is timed
// and, when the compiled model is destroyed, a table of time per op type (calls, milliseconds per
// run, share) is printed to stderr, heaviest first. Off by default: one branch per launch.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace amp::cpu {

class OpProfile {
 public:
  OpProfile();
  ~OpProfile();
  bool on() const { return on_; }
  void add(const std::string& op, std::chrono::steady_clock::duration spent);
  void end_run() { ++runs_; }

 private:
  struct Entry {
    int64_t calls = 0;
    double seconds = 0;
  };
  bool on_ = false;
  int64_t runs_ = 0;
  std::map<std::string, Entry> ops_;
};

}  // namespace amp::cpu
