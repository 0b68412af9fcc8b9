// The processes of a data-parallel run as the backends and the trainer see them (DESIGN.md, "Data
// parallel as part of the step graph"): who this process is among them, and the host-side
// collectives a run needs. The CPU backend lowers the step graph's AllReduce nodes to sum(); the
// CUDA backend bootstraps NCCL through broadcast() (rank 0's unique id) and picks its GPU by
// local_rank(); the trainer shards the data, agrees on metrics and checks that every rank was
// started alike. MPI implements it (backends/mpi/), for processes started by mpirun or srun.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace amp {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's place among the processes on its machine, and their number: its GPU.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // The machine's name, for messages ("rank 1 of 2 on node7").
  virtual std::string host() const = 0;

  // Element-wise sums over every rank, in place. Every rank receives the same bits (the sum is
  // reduced in one place per element and sent back, or summed in the same order everywhere).
  virtual void sum(float* data, size_t count) = 0;
  virtual void sum(double* data, size_t count) = 0;
  // Root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's bytes, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // Ends every process of the run with this exit code: for an error one rank meets alone while
  // the others may wait in a collective that would never complete.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// What started this process, from the launchers' environment variables: OpenMPI's mpirun
// (OMPI_COMM_WORLD_SIZE), a PMIx or PMI launcher (Slurm's srun --mpi=pmix|pmi2, MPICH's hydra),
// or torchrun (WORLD_SIZE with RANK), which amp-train does not join. size 1 when none did.
struct Launch {
  std::string launcher;  // "" when started alone
  int size = 1;          // -1 when the launcher's variables do not say (PMIx)
  int rank = 0;
  bool mpi = false;  // a launcher MPI joins (not torchrun)
};
Launch launch_from_environment(const std::function<const char*(const char*)>& getenv);

// The communicator of the processes started together with this one by mpirun or srun; nullptr for
// a process started alone (every command then runs as one process, MPI untouched). InputError
// when launched as one of several processes by torchrun, or by an MPI launcher while this build
// has no MPI: each process would otherwise train alone on the whole data.
std::shared_ptr<Communicator> join_launched_processes();

// Whether this build can join an MPI launch (built with MPI).
bool built_with_mpi();

}  // namespace amp
