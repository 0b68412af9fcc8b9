// Host bytes standing in for a device buffer in the CPU emulations of CUDA code: they end where an
// inaccessible page begins (and start after one), so a kernel reading or writing past either end
// faults at once, and they start filled with a chosen byte, so an element no thread writes shows.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "graph/error.h"
#include "graph/tensor.h"

namespace amp::test {

class GuardedBuffer {
 public:
  GuardedBuffer(size_t bytes, unsigned char fill) : bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t pages = (bytes + page - 1) / page;
    total_ = (pages + 2) * page;
    void* base = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw Error("mmap failed");
    base_ = static_cast<unsigned char*>(base);
    mprotect(base_, page, PROT_NONE);
    mprotect(base_ + (pages + 1) * page, page, PROT_NONE);
    data_ = base_ + (pages + 1) * page - bytes;
    if (bytes) std::memset(data_, fill, bytes);
  }
  // A copy of t's bytes.
  explicit GuardedBuffer(const Tensor& t) : GuardedBuffer(t.nbytes(), 0) {
    if (t.nbytes()) std::memcpy(data_, t.data(), t.nbytes());
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { munmap(base_, total_); }
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  // The bytes as a tensor of (type, dims), which must be as many bytes.
  Tensor as(DType t, std::vector<int64_t> dims) const {
    Tensor out(t, std::move(dims));
    EXPECT_EQ(out.nbytes(), bytes_);
    if (out.nbytes() == bytes_ && bytes_) std::memcpy(out.mutable_data(), data_, bytes_);
    return out;
  }

 private:
  size_t bytes_ = 0, total_ = 0;
  unsigned char *base_ = nullptr, *data_ = nullptr;
};

}  // namespace amp::test
