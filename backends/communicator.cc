#include "backends/communicator.h"

#include <cstdlib>

#include "graph/error.h"

#ifdef AMP_HAVE_MPI
#include "backends/mpi/mpi_communicator.h"
#endif

namespace amp {

namespace {

// An integer environment variable, or `otherwise` when it is unset or not a number.
int env_int(const std::function<const char*(const char*)>& getenv, const char* name, int otherwise) {
  const char* v = getenv(name);
  if (!v || !*v) return otherwise;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end ? otherwise : static_cast<int>(n);
}

}  // namespace

Launch launch_from_environment(const std::function<const char*(const char*)>& getenv) {
  struct Launcher {
    const char* name;
    const char* rank;  // set in every process the launcher starts
    const char* size;  // its count, where the launcher says it
    bool mpi;
  };
  // Most specific first: OpenMPI's mpirun also sets PMIX_RANK, and srun sets SLURM_* for both
  // PMI flavours.
  static const Launcher kLaunchers[] = {
      {"mpirun (OpenMPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", true},
      {"a PMIx launcher (srun --mpi=pmix, prterun)", "PMIX_RANK", "SLURM_STEP_NUM_TASKS", true},
      {"a PMI launcher (srun --mpi=pmi2, MPICH's mpiexec)", "PMI_RANK", "PMI_SIZE", true},
      {"torchrun", "RANK", "WORLD_SIZE", false},
  };
  for (const Launcher& l : kLaunchers) {
    const int rank = env_int(getenv, l.rank, -1);
    if (rank < 0) continue;
    // torchrun's names are generic: only a world of several processes counts as its launch.
    const int size = env_int(getenv, l.size, -1);
    if (!l.mpi && size <= 1) continue;
    return Launch{l.name, size, rank, l.mpi};
  }
  return Launch{};
}

bool built_with_mpi() {
#ifdef AMP_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::shared_ptr<Communicator> join_launched_processes() {
  const Launch launch = launch_from_environment([](const char* name) { return std::getenv(name); });
  if (launch.launcher.empty()) return nullptr;
  const std::string who = "started as rank " + std::to_string(launch.rank) +
                          (launch.size > 0 ? " of " + std::to_string(launch.size) : std::string()) + " by " +
                          launch.launcher;
  if (!launch.mpi)
    throw InputError(who + ", which this program does not join: launch data-parallel training with mpirun -np N " +
                     "(or srun) instead");
#ifdef AMP_HAVE_MPI
  return make_mpi_communicator();
#else
  if (launch.size == 1) return nullptr;
  throw InputError(who + ", but this build has no MPI (configure with OpenMPI installed and AMP_ENABLE_MPI=ON): " +
                   "each process would train alone on all the data");
#endif
}

}  // namespace amp
