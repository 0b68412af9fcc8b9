#include "backends/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "graph/error.h"

namespace amp {

namespace {

// MPI counts are ints: larger buffers go in pieces of at most this many elements.
constexpr size_t kMaxCount = INT_MAX / 2;

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
  }

  ~MpiCommunicator() override {
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
      check(MPI_Bcast(p + at, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    if (mine.size() > kMaxCount) throw Error("all_gather: " + std::to_string(mine.size()) + " bytes is more than MPI counts");
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
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
      check(MPI_Allreduce(MPI_IN_PLACE, p + at * element, n, type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
  }

  bool owned_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  std::string host_;
};

}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator() { return std::make_shared<MpiCommunicator>(); }

}  // namespace amp
