// The pass interface: a name, a one-line summary, and run() that says whether it changed the graph.
// Statistics are named counters a pass fills while it runs; the PassManager prints and reports them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/model.h"

namespace amp {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  // Returns true when the model changed.
  virtual bool run(Model& m) = 0;
  const std::map<std::string, int64_t>& stats() const { return stats_; }

 protected:
  void count(const std::string& key, int64_t n = 1) { stats_[key] += n; }
  std::map<std::string, int64_t> stats_;
};

}  // namespace amp
