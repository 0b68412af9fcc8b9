// One CUDA device as the backend uses it: its properties, the single stream every launch goes to
// (so a step is one ordered sequence that CUDA Graphs can capture), the cuBLASLt and cuDNN
// handles bound to that stream, the cuBLASLt algorithm cache, the convolution algorithms that ran
// per shape, the ReLU-mask convention its cuBLASLt was found to have, the NVRTC kernels loaded so
// far, the device report (device_report.h) and in a data-parallel run NCCL with its own stream,
// which forks from and joins the step's. Shared by every executable compiled for the device.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "backends/cuda/algorithm_store.h"
#include "backends/cuda/device_report.h"
#include "backends/cuda/elementwise_codegen.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/relu_mask_probe.h"

namespace amp::cuda {

// "" when device 0 can run kernels; otherwise the CUDA runtime's reason (no driver, no device,
// a driver too old for this runtime, a device older than sm_80).
std::string device_unavailable_reason();

// A cudaMalloc'd block, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class DeviceContext {
 public:
  // The given device (0, or a data-parallel rank's: nccl_communicator.h). Throws Error with
  // device_unavailable_reason() when there is none.
  explicit DeviceContext(int device = 0);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int arch() const { return arch_; }  // compute capability as 80, 90, ...
  int sm_count() const { return sm_count_; }
  const std::string& device_name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return lt_; }
  cudnnHandle_t cudnn() const { return dnn_; }
  GemmAlgorithmCache& gemm_algorithms() { return gemm_algorithms_; }
  DeviceReport& report() { return report_; }

  // The convolution algorithm for a shape (its key): the fastest cuDNN measured, or the one that
  // ran after cuDNN refused those ranked higher. Later plans of that shape start with it, in this
  // process and the next ones (algorithm_store.h: beside the kernel images, per cuDNN version).
  std::optional<int> remembered_algorithm(const std::string& key);
  void remember_algorithm(const std::string& key, int algo);

  // How this device's cuBLASLt writes the ReLU mask for products of type t: probed with a tiny
  // product on first use (relu_mask_probe.h), then remembered.
  const ReluMaskConvention& relu_mask_convention(DType t);
  int device() const { return device_; }

  // NCCL over the processes of a data-parallel run, started once (a collective: every rank calls
  // it at the same point); null until then.
  void start_collectives(Communicator& run);
  NcclCommunicator* collectives() const { return nccl_.get(); }

  // The kernel of generated source, ready to launch: NVRTC through the image cache (memory, and a
  // folder kept between processes: kernel_cache_dir in device_context.cc) on first use, then a
  // lookup by name.
  cudaKernel_t load_kernel(const GeneratedKernel& k);
  const KernelImageCache& kernel_images() const { return *images_; }

  // What a family of units keeps for the context's life (cuDNN's attention plans per shape:
  // attention_ops.cc), made by `make` on first use, released before the handles.
  std::shared_ptr<void> unit_cache(const std::string& family, const std::function<std::shared_ptr<void>()>& make);

 private:
  int device_ = 0, arch_ = 0, sm_count_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  GemmAlgorithmCache gemm_algorithms_;
  DeviceReport report_;
  std::unique_ptr<AlgorithmStore> algorithms_;
  std::map<DType, ReluMaskConvention> relu_masks_;
  std::unique_ptr<KernelImageCache> images_;
  std::map<std::string, std::shared_ptr<void>> unit_caches_;
  std::string nvrtc_target_;
  std::mutex mutex_, probe_mutex_;
  std::unordered_map<std::string, std::pair<cudaLibrary_t, cudaKernel_t>> kernels_;
  std::unique_ptr<NcclCommunicator> nccl_;
};

}  // namespace amp::cuda
