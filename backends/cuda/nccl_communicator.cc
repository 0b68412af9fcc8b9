#include "backends/cuda/nccl_communicator.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {

void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  throw Error("NCCL error " + std::to_string(static_cast<int>(status)) + " (" + ncclGetErrorString(status) + ") in " +
              call + " (" + file + ":" + std::to_string(line) + ")");
}

int device_for_local_rank(int local_rank, int local_size, int devices) {
  if (devices >= local_size) return local_rank;
  if (devices == 1) return 0;
  throw InputError(std::to_string(local_size) + " processes on this machine but " + std::to_string(devices) +
                   " GPUs: start at most one process per GPU (mpirun -np N --map-by ppr:" + std::to_string(devices) +
                   ":node)");
}

NcclCommunicator::NcclCommunicator(Communicator& bootstrap) : size_(bootstrap.size()) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) AMP_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof id, 0);
  AMP_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, bootstrap.rank()));
  AMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_) cudaStreamDestroy(stream_);
  if (comm_) ncclCommDestroy(comm_);
}

}  // namespace amp::cuda
