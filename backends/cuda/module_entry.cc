// The entry points of libamp_cuda_backend.so, looked up by name (backends/cuda_module.h): extern
// "C", so that the names are plain; the types they pass are this project's own, the executable and
// the module being built together.
#include "backends/backend.h"
#include "backends/cuda/plan_report.h"

extern "C" {

// A new cuda::CudaBackend, owned by the caller.
__attribute__((visibility("default"))) amp::Backend* amp_cuda_module_make_backend() {
  return amp::make_cuda_backend().release();
}

// cuda::plan_report into *out; its InputError propagates to the caller, which catches it by type.
__attribute__((visibility("default"))) void amp_cuda_module_plan_report(
    const amp::Model* m, const amp::CompileOptions* options, const std::vector<amp::Tensor>* feeds,
    const std::vector<std::string>* fetch_names, std::string (*human_bytes)(int64_t), nlohmann::ordered_json* out) {
  *out = amp::cuda::plan_report(*m, *options, *feeds, *fetch_names, human_bytes);
}

}  // extern "C"
