// Runs a pipeline of passes over a model, times each one and, with verify_each, checks the graph
// after every pass so a broken rewrite is blamed on the pass that made it, not on a later one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace amp {

// What one pass did in one run: for reports and `--verify-each` diagnostics.
struct PassRun {
  std::string name;
  double seconds = 0;
  bool changed = false;
  std::map<std::string, int64_t> stats;
};

class PassManager {
 public:
  explicit PassManager(bool verify_each = false) : verify_each_(verify_each) {}
  void add(std::unique_ptr<Pass> pass);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

  // Runs every pass once, in order; true when any of them changed the model. Under verify_each a
  // pass that leaves problems throws Error("pass '<name>' broke the graph: <problem>").
  bool run(Model& m);
  // One entry per pass of the latest run().
  const std::vector<PassRun>& runs() const { return runs_; }

 private:
  bool verify_each_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassRun> runs_;
};

}  // namespace amp
