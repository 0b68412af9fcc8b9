// make_backend: the one place that maps a device name to a backend.
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "graph/error.h"

namespace amp {

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (device == "cpu") return std::make_unique<cpu::CpuBackend>();
  if (device != "cuda" && device != "auto")
    throw InputError("unknown device '" + device + "' (expected cpu, cuda or auto)");
#ifdef AMP_HAVE_CUDA
  std::unique_ptr<Backend> cuda = make_cuda_backend();
  std::string why;
  if (cuda->available(&why)) return cuda;
#else
  const std::string why = "this build has no CUDA backend (nvcc not found at configure time, or AMP_ENABLE_CUDA=OFF)";
#endif
  if (device == "cuda") throw InputError("cuda backend not available: " + why);
  return std::make_unique<cpu::CpuBackend>();
}

}  // namespace amp
