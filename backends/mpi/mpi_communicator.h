// The Communicator of processes started by mpirun or srun: MPI_COMM_WORLD, initialised here
// (MPI_THREAD_FUNNELED: only the thread that made it calls MPI) and finalised when the last
// reference goes. Built only with MPI (AMP_ENABLE_MPI, on when CMake finds it).
#pragma once

#include <memory>

#include "backends/communicator.h"

namespace amp {

// Error (naming the MPI call and MPI's reason) when MPI cannot start.
std::shared_ptr<Communicator> make_mpi_communicator();

}  // namespace amp
