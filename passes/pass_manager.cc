#include "passes/pass_manager.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "graph/error.h"
#include "graph/verify.h"

namespace amp {

void PassManager::add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

bool PassManager::run(Model& m) {
  runs_.clear();
  bool changed = false;
  for (auto& pass : passes_) {
    const auto start = std::chrono::steady_clock::now();
    PassRun r;
    r.name = pass->name();
    r.changed = pass->run(m);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.stats = pass->stats();
    spdlog::debug("pass {}: {} in {:.3f} ms", r.name, r.changed ? "changed" : "unchanged", r.seconds * 1e3);
    changed |= r.changed;
    runs_.push_back(std::move(r));
    if (verify_each_) {
      const auto problems = verify(m);
      if (!problems.empty()) {
        std::string msg = "pass '" + pass->name() + "' broke the graph: " + problems[0];
        if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more)";
        throw Error(msg);
      }
    }
  }
  return changed;
}

}  // namespace amp
