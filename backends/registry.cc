// make_backend: the one place that maps a device name to a backend.
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda_module.h"
#include "graph/error.h"

namespace amp {

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (device == "cpu") return std::make_unique<cpu::CpuBackend>();
  if (device != "cuda" && device != "auto")
    throw InputError("unknown device '" + device + "' (expected cpu, cuda or auto)");
  std::string why;
#if AMP_CUDA_LINKED
  // The CUDA backend compiled into this executable (tests/cuda_backend_emulated).
  std::unique_ptr<Backend> cuda = make_cuda_backend();
  if (cuda->available(&why)) return cuda;
#else
  // The shared module, loaded now and only now (backends/cuda_module.h); for auto, only where a
  // driver could run it.
  using Make = Backend* (*)();
  if (device == "auto" && !cuda_driver_present()) return std::make_unique<cpu::CpuBackend>();
  if (const auto make = reinterpret_cast<Make>(cuda_module_symbol("amp_cuda_module_make_backend", &why))) {
    std::unique_ptr<Backend> cuda(make());
    if (cuda->available(&why)) return cuda;
  }
#endif
  if (device == "cuda") throw InputError("cuda backend not available: " + why);
  return std::make_unique<cpu::CpuBackend>();
}

}  // namespace amp
