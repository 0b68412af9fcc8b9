// A compiled model on a CUDA device: a Schedule (schedule.h: host steps, device units, per
// signature the shapes and the fused and multi-tensor kernels) plus what lives on the device.
//
// Compile: the schedule is built and state is copied to the device once. Plan, once per
// input-shape signature: the schedule's plan, one device arena laid out by liveness over the
// units' run order, reshapes sharing their input's buffer (device_layout.h), host values the
// device reads uploaded, each unit prepared (cuBLASLt/cuDNN algorithms chosen, kernels compiled
// by NVRTC). Run: feeds copied in (from where prefetch() uploaded them while the run before
// worked, when it did) and a fresh random seed written to device memory, units enqueued on one stream — from the third
// run of a plan on, as one captured CUDA Graph replay — state updated on the device, fetches
// copied out, one synchronisation at the end. The loss scale and the skip decision of a
// mixed-precision step are graph values, so they never leave the device. A unit that leaves work
// running on a stream of its own (a data-parallel AllReduce on NCCL's) is joined by an event where
// its outputs are first read, or at the end of the step, inside the capture as outside it.
//
// Environment: AMP_CUDA_GRAPHS=0 runs without graph capture; AMP_CUDA_UNIT_TIMES=K times the K-th
// run of each plan unit by unit into the device report (unit_times.h); AMP_CUDA_TF32=1 lets fp32 products
// and convolutions use TF32 (as CompileOptions::tf32, amp-train --tf32, does); NVRTC's output is
// kept between processes in ${XDG_CACHE_HOME:-~/.cache}/onnx-amp/kernels/DEVICE, or in
// AMP_KERNEL_CACHE_DIR when set (set empty: nowhere).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/device_context.h"
#include "backends/cuda/feed_prefetch.h"
#include "backends/cuda/schedule.h"
#include "backends/cuda/unit_times.h"

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
  void prefetch(const std::vector<std::pair<std::string, Tensor>>& feeds) override;

  // Bytes of feeds the runs found prefetched (for tests and benchmarks).
  size_t prefetched_bytes() const { return prefetch_.bytes_taken(); }
  // Page-locked host bytes the prefetches upload through (feed_prefetch.h).
  size_t prefetch_staging_bytes() const { return prefetch_.staging_bytes(); }
  // Runs of the latest plan that replayed a captured CUDA Graph (for tests and benchmarks).
  size_t graph_replays() const;
  double last_run_device_ms() const override { return last_device_ms_; }

 private:
  struct Plan;
  std::unique_ptr<Plan> build_plan(const std::vector<const Tensor*>& fed, const std::vector<int>& fetches);
  // times: unit_times.h's events, one before the units, one after each and one at the end.
  void enqueue_step(Plan& plan, UnitTimes* times = nullptr);
  void record_unit_times_of(const Plan& plan, const UnitTimes& times, uint64_t run);
  const DeviceBuffer& device_constant(int value);
  void upload(void* dst, const void* src, size_t bytes);

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
  bool tf32_ = false;
  FeedPrefetch prefetch_;
  // Recorded on the step's stream around each run's device work: last_run_device_ms.
  cudaEvent_t run_start_ = nullptr, run_end_ = nullptr;
  double last_device_ms_ = -1.0;
};

}  // namespace amp::cuda
