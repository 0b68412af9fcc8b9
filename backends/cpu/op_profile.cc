#include "backends/cpu/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace amp::cpu {

OpProfile::OpProfile() {
  const char* v = std::getenv("AMP_PROFILE");
  on_ = v && *v && std::strcmp(v, "0") != 0;
}

void OpProfile::add(const std::string& op, std::chrono::steady_clock::duration spent) {
  Entry& e = ops_[op];
  ++e.calls;
  e.seconds += std::chrono::duration<double>(spent).count();
}

OpProfile::~OpProfile() {
  if (!on_ || runs_ == 0) return;
  std::vector<std::pair<std::string, Entry>> rows(ops_.begin(), ops_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::fprintf(stderr, "profile: %lld runs, %.2f ms per run in kernels\n", static_cast<long long>(runs_),
               1e3 * total / static_cast<double>(runs_));
  std::fprintf(stderr, "%-28s %10s %12s %7s\n", "op", "calls/run", "ms/run", "share");
  for (const auto& [op, e] : rows)
    std::fprintf(stderr, "%-28s %10.1f %12.3f %6.1f%%\n", op.c_str(),
                 static_cast<double>(e.calls) / static_cast<double>(runs_), 1e3 * e.seconds / static_cast<double>(runs_),
                 total > 0 ? 100 * e.seconds / total : 0.0);
}

}  // namespace amp::cpu
