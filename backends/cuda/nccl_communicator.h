// NCCL for the AllReduce nodes of data-parallel training on GPUs: one NCCL communicator over the
// run's processes, one GPU each, bootstrapped through the run's Communicator (MPI): rank 0 makes
// NCCL's unique id, a broadcast hands it to every rank and each joins with ncclCommInitRank (the
// pattern llm.c uses). Collectives go to a stream of their own, so the backward pass keeps the
// device busy while earlier gradients are averaged (collective_ops.cc).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "backends/communicator.h"

namespace amp::cuda {

void check_nccl(ncclResult_t status, const char* call, const char* file, int line);
#define AMP_NCCL_CHECK(call) ::amp::cuda::check_nccl((call), #call, __FILE__, __LINE__)

// The GPU of a process among `local_size` on its machine that see `devices` GPUs: its local rank's
// when there are enough; device 0 when each process sees one (a launcher that binds GPUs, as Slurm's
// --gpus-per-task, sets CUDA_VISIBLE_DEVICES per process). InputError otherwise: two processes on
// one GPU is a launch mistake NCCL refuses.
int device_for_local_rank(int local_rank, int local_size, int devices);

class NcclCommunicator {
 public:
  // Collective over every rank of `bootstrap`, on the current CUDA device. Error naming the NCCL
  // call and its reason when NCCL cannot start.
  explicit NcclCommunicator(Communicator& bootstrap);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int size() const { return size_; }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int size_ = 1;
};

}  // namespace amp::cuda
