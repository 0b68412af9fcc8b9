#include "backends/mpi/mpi_communicator.h"

#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "graph/error.h"

namespace amp {

namespace {

// MPI counts are ints: larger buffers go in pieces of at most this many elements.
constexpr size_t kMaxCount = INT_MAX / 2;

// AMP_COLLECTIVE_TIMEOUT (seconds, 0: none): how long a rank may wait in one collective before it
// ends itself. The default is torch.distributed's default process-group timeout, 30 minutes: long
// enough for rank 0 to write a large checkpoint while the others wait at the next collective.
int collective_timeout_seconds() {
  const char* v = std::getenv("AMP_COLLECTIVE_TIMEOUT");
  if (!v || !*v) return 1800;
  char* end = nullptr;
  const long s = std::strtol(v, &end, 10);
  return *end || s < 0 ? 1800 : static_cast<int>(std::min<long>(s, INT_MAX));
}

// A process that is stuck (not dead: mpirun ends the job when one dies) would hold every other
// rank in its next collective forever. The watchdog, a thread that checks once a second, ends a
// rank that has waited in one collective longer than the timeout: it prints one line and exits
// (no MPI call: MPI is the main thread's), and mpirun, seeing a process end with an error, ends
// the rest.
class Watchdog {
 public:
  Watchdog(int timeout_seconds, std::string who) : timeout_(timeout_seconds), who_(std::move(who)) {
    if (timeout_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Marks the calling thread as waiting in `call` until the returned guard goes.
  class Wait {
   public:
    Wait(Watchdog& w, const char* call) : w_(w) {
      w_.call_.store(call);
      w_.since_.store(now_ms());
    }
    ~Wait() { w_.since_.store(0); }

   private:
    Watchdog& w_;
  };

 private:
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      const int64_t since = since_.load();
      if (since == 0 || now_ms() - since < int64_t{timeout_} * 1000) continue;
      std::fprintf(stderr,
                   "error: %s: waited %d s in %s for the other processes (one is stuck; AMP_COLLECTIVE_TIMEOUT "
                   "sets the limit): ending the run\n",
                   who_.c_str(), timeout_, call_.load());
      std::fflush(stderr);
      _exit(1);
    }
  }

  int timeout_;
  std::string who_;
  std::atomic<int64_t> since_{0};
  std::atomic<const char*> call_{""};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owned_ = true;
    }
    // Errors come back as codes and become exceptions, so the rank can say what failed before the
    // job is ended (MPI's default handler aborts with MPI's own words only).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_), "MPI_Comm_split_type");
    check(MPI_Comm_rank(local_, &local_rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(local_, &local_size_), "MPI_Comm_size");
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    host_.assign(name, static_cast<size_t>(length));
    watchdog_ = std::make_unique<Watchdog>(collective_timeout_seconds(), "rank " + std::to_string(rank_) + " of " +
                                                                            std::to_string(size_) + " on " + host_);
  }

  ~MpiCommunicator() override {
    watchdog_.reset();
    if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string host() const override { return host_; }

  void sum(float* data, size_t count) override { sum_in_place(data, count, MPI_FLOAT, sizeof(float)); }
  void sum(double* data, size_t count) override { sum_in_place(data, count, MPI_DOUBLE, sizeof(double)); }

  void broadcast(void* data, size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (size_t at = 0; at < bytes; at += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, bytes - at));
      Watchdog::Wait wait(*watchdog_, "MPI_Bcast");
      check(MPI_Bcast(p + at, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    if (mine.size() > kMaxCount) throw Error("all_gather: " + std::to_string(mine.size()) + " bytes is more than MPI counts");
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
    Watchdog::Wait wait(*watchdog_, "MPI_Allgather");
    check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[static_cast<size_t>(r)] = static_cast<int>(total);
      total += static_cast<size_t>(lengths[static_cast<size_t>(r)]);
    }
    if (total > kMaxCount) throw Error("all_gather: " + std::to_string(total) + " bytes is more than MPI counts");
    std::string all(total, '\0');
    check(MPI_Allgatherv(mine.data(), length, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                               static_cast<size_t>(lengths[static_cast<size_t>(r)])));
    return out;
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  void sum_in_place(void* data, size_t count, MPI_Datatype type, size_t element) {
    auto* p = static_cast<char*>(data);
    for (size_t at = 0; at < count; at += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, count - at));
      Watchdog::Wait wait(*watchdog_, "MPI_Allreduce");
      check(MPI_Allreduce(MPI_IN_PLACE, p + at * element, n, type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
  }

  bool owned_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  std::string host_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator() { return std::make_shared<MpiCommunicator>(); }

}  // namespace amp
