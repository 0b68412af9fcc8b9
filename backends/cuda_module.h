// The CUDA backend as a shared module: libamp_cuda_backend.so (backends/cuda/, built when nvcc is
// found), loaded by a process only when it asks for the cuda device or its plan, so that a CPU run
// never maps cudart, cuBLASLt, cuDNN, NVRTC or NCCL. The module's entry points are extern "C"
// (backends/cuda/module_entry.cc); it resolves what it uses of graph/ and backends/ against the
// executable (CMakeLists.txt, amp_backend_registry).
#pragma once

#include <string>

namespace amp {

// The module's entry point `name`, the module loaded on the first call (RTLD_NOW | RTLD_LOCAL,
// never unloaded). Looked for at $AMP_CUDA_BACKEND when that is set, else beside the executable,
// else in the build folder that built this one. nullptr, with *why saying why in one line, when
// this build has no CUDA backend, the module is not found, it fails to load (a CUDA library
// missing, a symbol the executable does not export) or it lacks the entry point.
void* cuda_module_symbol(const char* name, std::string* why);

// Whether the CUDA driver's library (libcuda.so.1, which the CUDA runtime loads) can be loaded: no
// GPU can be used without it, so --device auto goes to the CPU without loading the module.
bool cuda_driver_present();

}  // namespace amp
