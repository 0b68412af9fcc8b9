// What every oneDNN-backed CPU kernel shares: the CPU engine, a stream per thread, the thread count
// oneDNN reads from OpenMP (the backend's one pool), user-managed scratchpads (placed in the
// kernel's workspace) and the rule that a reference implementation counts as none.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <string>

namespace amp::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();

// oneDNN reads its thread count from OpenMP when a primitive is made and run; the kernels' own
// loops name theirs in each parallel region, so setting it around oneDNN's calls is enough.
class OmpThreads {
 public:
  explicit OmpThreads(int n);
  ~OmpThreads();
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int previous_;
};

// Attributes asking for a scratchpad the caller provides.
dnnl::primitive_attr user_scratchpad();

// oneDNN's reference implementations are plain loops, far slower than the kernels' own paths: a
// primitive that would run one is treated as unimplemented (throws dnnl::error).
void require_optimised(const char* impl_info);

inline size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace amp::cpu::onednn
