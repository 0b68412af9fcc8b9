// The CUDA backend: "cuda" in make_backend. Available when device 0 is an sm_80 or newer GPU with
// a working driver; otherwise available() says what the CUDA runtime reported (on a machine
// without a GPU: cudaErrorInsufficientDriver or cudaErrorNoDevice), and `--device auto` falls
// back to the CPU. One DeviceContext (stream, library handles, caches) is shared by everything
// the backend compiles; compiled with a data-parallel Communicator, it is on the GPU of the
// process's local rank and holds NCCL over the run's processes.
#pragma once

#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "backends/cuda/device_context.h"

namespace amp::cuda {

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  bool available(std::string* why) const override;
  std::string unsupported_reason(const Node& n) const override;
  std::unique_ptr<Executable> compile(const Model& m, const CompileOptions& options) override;

 private:
  std::mutex mutex_;
  std::shared_ptr<DeviceContext> ctx_;
};

}  // namespace amp::cuda
