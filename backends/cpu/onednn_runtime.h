// What every oneDNN-backed CPU kernel shares: the CPU engine, a stream per thread, the thread count
// oneDNN reads from OpenMP (the backend's one pool), user-managed scratchpads (placed in the
// kernel's workspace) and the rule that a reference implementation counts as none.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

// The primitives one kernel made, one per input signature (two operands' dims, a tag for the
// element type and options, the thread count). A later run finds its primitive by comparing dims,
// with no allocation; make() runs once per signature and may return null (no oneDNN path there),
// which is remembered too. Prim has ok(): false when oneDNN had no implementation.
template <class Prim>
class PrimitiveCache {
 public:
  template <class Make>
  const Prim* find_or_make(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int tag, int threads,
                           Make&& make) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_)
      if (e.tag == tag && e.threads == threads && e.a == a && e.b == b) return usable(e.prim.get());
    entries_.push_back(Entry{a, b, tag, threads, make()});
    return usable(entries_.back().prim.get());
  }

 private:
  struct Entry {
    std::vector<int64_t> a, b;
    int tag, threads;
    std::unique_ptr<Prim> prim;
  };
  static const Prim* usable(const Prim* p) { return p && p->ok() ? p : nullptr; }
  mutable std::mutex mutex_;
  mutable std::vector<Entry> entries_;
};

}  // namespace amp::cpu::onednn
