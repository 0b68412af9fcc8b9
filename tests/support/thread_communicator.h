// The ranks of a data-parallel run as threads of one test process: a Communicator whose
// collectives meet in shared memory, so a test runs several replicas of a step side by side
// without MPI. sum() adds the ranks' values in rank order on every rank, so every rank gets the
// same bits, as the Communicator contract asks; sums() counts the calls of each rank.
#pragma once

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/communicator.h"

namespace amp::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  // Every rank waits here until all have arrived.
  void barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }
  std::string& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

 private:
  int size_;
  std::vector<std::string> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return group_->size(); }
  std::string host() const override { return "test"; }
  void sum(float* data, size_t count) override { add(data, count); }
  void sum(double* data, size_t count) override { add(data, count); }
  void broadcast(void* data, size_t bytes, int root) override {
    if (rank_ == root) group_->slot(root).assign(static_cast<const char*>(data), bytes);
    group_->barrier();
    if (rank_ != root) std::memcpy(data, group_->slot(root).data(), bytes);
    group_->barrier();
  }
  std::vector<std::string> all_gather(const std::string& mine) override {
    group_->slot(rank_) = mine;
    group_->barrier();
    std::vector<std::string> all;
    for (int r = 0; r < size(); ++r) all.push_back(group_->slot(r));
    group_->barrier();
    return all;
  }
  [[noreturn]] void abort(int) override { std::abort(); }
  int sums() const { return sums_; }

 private:
  template <class T>
  void add(T* data, size_t count) {
    ++sums_;
    group_->slot(rank_).assign(reinterpret_cast<const char*>(data), count * sizeof(T));
    group_->barrier();
    for (size_t i = 0; i < count; ++i) {
      T total = 0;
      for (int r = 0; r < size(); ++r) total += reinterpret_cast<const T*>(group_->slot(r).data())[i];
      data[i] = total;
    }
    group_->barrier();
  }

  std::shared_ptr<ThreadGroup> group_;
  int rank_;
  int sums_ = 0;
};

// Communicators of `size` ranks sharing one group.
inline std::vector<std::shared_ptr<ThreadCommunicator>> thread_ranks(int size) {
  auto group = std::make_shared<ThreadGroup>(size);
  std::vector<std::shared_ptr<ThreadCommunicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_shared<ThreadCommunicator>(group, r));
  return ranks;
}

}  // namespace amp::test
