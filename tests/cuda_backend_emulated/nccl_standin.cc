// A host stand-in of the NCCL calls backends/cuda/ makes, written from NCCL's documentation: the
// ranks of a communicator are threads of this process (ncclCommInitRank with the same unique id
// from each), a collective is work on its stream (run at once, or recorded into a CUDA Graph
// capture and run at each replay, as the cudart stand-in does) that waits for every rank's call
// and gives each the element-wise sum in rank order, in the data's type (ncclAvg: then divided by
// the rank count), so every rank gets the same bits. fp32 and fp64; calls between ncclGroupStart and ncclGroupEnd run as
// they are issued, which a group of independent collectives allows.
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

namespace {

// The ranks of one unique id: where each collective's contributions meet.
struct Clique {
  int size = 0;
  int joined = 0;
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t round = 0;  // collectives completed
  int arrived = 0, left = 0;
  std::vector<std::string> inputs;  // per rank, its bytes

  // Rank `rank` contributes `in`; returns every rank's contribution, in rank order, once all have.
  std::vector<std::string> gather(int rank, std::string in) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return left == 0; });  // the previous round's readers are done
    const uint64_t mine = round;
    inputs[static_cast<size_t>(rank)] = std::move(in);
    if (++arrived == size) {
      ++round;
      left = size;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return round != mine; });
    }
    std::vector<std::string> all = inputs;
    if (--left == 0) {
      arrived = 0;
      cv.notify_all();
    }
    return all;
  }
};

// recv = the sum over ranks, in rank order and in T (ncclAvg: then divided by the rank count).
template <class T>
void reduce(const std::vector<std::string>& all, T* recv, size_t count, bool average) {
  for (size_t i = 0; i < count; ++i) {
    T sum = 0;
    for (const std::string& contribution : all) sum += reinterpret_cast<const T*>(contribution.data())[i];
    recv[i] = average ? sum / static_cast<T>(all.size()) : sum;
  }
}

std::mutex g_mutex;
std::map<std::string, std::shared_ptr<Clique>> g_cliques;
uint64_t g_ids = 0;

}  // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
};

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof id->internal);
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string text = "standin-clique-" + std::to_string(++g_ids);
  std::memcpy(id->internal, text.data(), text.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::shared_ptr<Clique> clique;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& c = g_cliques[std::string(id.internal, sizeof id.internal)];
    if (!c) {
      c = std::make_shared<Clique>();
      c->size = nranks;
      c->inputs.resize(static_cast<size_t>(nranks));
    }
    if (c->size != nranks) return ncclInvalidUsage;
    clique = c;
  }
  *comm = new ncclComm{clique, rank};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!comm || (datatype != ncclFloat32 && datatype != ncclFloat64) || (op != ncclSum && op != ncclAvg))
    return ncclInvalidArgument;
  const size_t element = datatype == ncclFloat32 ? sizeof(float) : sizeof(double);
  if (count && (!amp_standin::is_device_range(sendbuff, count * element) ||
                !amp_standin::is_device_range(recvbuff, count * element)))
    return ncclInvalidArgument;
  const int rank = comm->rank;
  std::shared_ptr<Clique> clique = comm->clique;
  const cudaError_t e = amp_standin::enqueue(stream, [=] {
    const auto all = clique->gather(rank, std::string(static_cast<const char*>(sendbuff), count * element));
    if (datatype == ncclFloat32)
      reduce(all, static_cast<float*>(recvbuff), count, op == ncclAvg);
    else
      reduce(all, static_cast<double*>(recvbuff), count, op == ncclAvg);
  });
  return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (stand-in)";
    case ncclInvalidUsage: return "invalid usage (stand-in)";
    case ncclUnhandledCudaError: return "unhandled cuda error (stand-in)";
    default: return "NCCL error (stand-in)";
  }
}

}  // extern "C"
