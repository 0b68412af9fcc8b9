// A compiled model on a CUDA device.
//
// Compile: the main graph is numbered (backends/program.h); nodes whose values are known on the
// host — Constants, Shape and the arithmetic on shapes, anything reading only those — are marked
// host steps; the rest become device units: cuBLASLt products that absorb their bias/ReLU or bias
// gradient (matmul_ops.h), fused elementwise groups (passes/fusion, one generated kernel each),
// and one op per remaining node from the CUDA op table. State is copied to the device once.
//
// Plan, once per input-shape signature: every value's type and dims from the CPU backend's
// kernels (the one implementation of ONNX shape rules), host steps run on the CPU, one device
// arena laid out by liveness (backends/memory_plan.h), each unit prepared (algorithms chosen,
// kernels compiled by NVRTC). Run: feeds copied in, units enqueued on one stream — after two
// warm-up runs of a plan, as one captured CUDA Graph — state updated in place on the device,
// fetches copied out, one synchronisation at the end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/device_context.h"
#include "backends/cuda/schedule.h"

namespace amp::cuda {

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(const Model& m, const CompileOptions& options, std::shared_ptr<DeviceContext> ctx);
  ~CudaExecutable() override;

  std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches) override;
  std::vector<std::string> state_names() const override;
  Tensor read_state(const std::string& name) const override;
  void write_state(const std::string& name, const Tensor& value) override;
  MemoryStats memory() const override;

  // Runs of the latest plan that replayed a captured CUDA Graph (for tests and benchmarks).
  size_t graph_replays() const;

 private:
  struct Plan;
  std::vector<const Tensor*> bind_feeds(const std::vector<std::pair<std::string, Tensor>>& feeds) const;
  std::string signature(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches) const;
  std::unique_ptr<Plan> build_plan(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches);
  void enqueue_step(Plan& plan);
  const DeviceBuffer& device_constant(int value);

  std::shared_ptr<DeviceContext> ctx_;
  const Schedule s_;

  struct State {
    std::string name;
    DType dtype;
    std::vector<int64_t> dims;
    DeviceBuffer buffer;
  };
  std::vector<State> state_;  // in s_.state_values order
  std::map<int, DeviceBuffer> constants_on_device_;  // non-state initializers a device unit reads
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  Plan* last_plan_ = nullptr;
  uint64_t seed_ = 0, runs_ = 0;
};

}  // namespace amp::cuda
