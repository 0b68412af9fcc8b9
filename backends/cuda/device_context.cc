#include "backends/cuda/device_context.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

#include "backends/cuda/cuda_check.h"
#include "graph/error.h"

namespace amp::cuda {
namespace {

// Where NVRTC's images and the convolution algorithms chosen (algorithm_store.h) stay between
// processes: $AMP_KERNEL_CACHE_DIR when set (set empty: nowhere, memory only), else
// ${XDG_CACHE_HOME:-$HOME/.cache}/onnx-amp/kernels/DEVICE, as CUDA's own JIT cache and Triton keep
// theirs. An image's key is its source, NVRTC's version, the target and the
// options (KernelImageCache::get), so no stale image can be found; the folder per device name keeps
// the host stand-ins' images apart from a GPU's.
std::string kernel_cache_dir(const std::string& device_name) {
  if (const char* dir = std::getenv("AMP_KERNEL_CACHE_DIR")) return dir;
  std::string base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = std::string(home) + "/.cache";
  else
    return "";
  std::string folder;
  for (char c : device_name) folder += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return base + "/onnx-amp/kernels/" + folder;
}

}  // namespace

std::string device_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cannot read the properties of CUDA device 0";
  // bf16 conversions (cvt.rn.bf16.f32) and cp.async need Ampere; the build targets sm_80 and sm_90.
  if (prop.major < 8)
    return std::string(prop.name) + " has compute capability " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor) + "; the cuda backend needs 8.0 (A100) or newer";
  return "";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) AMP_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceContext::DeviceContext(int device) : device_(device) {
  const std::string why = device_unavailable_reason();
  if (!why.empty()) throw Error("cuda backend: " + why);
  AMP_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  AMP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  arch_ = prop.major * 10 + prop.minor;
  sm_count_ = prop.multiProcessorCount;
  name_ = prop.name;
  nvrtc_target_ = nvrtc_target_for(arch_);
  images_ = std::make_unique<KernelImageCache>(kernel_cache_dir(name_));
  AMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  AMP_CUBLAS_CHECK(cublasLtCreate(&lt_));
  AMP_CUDNN_CHECK(cudnnCreate(&dnn_));
  AMP_CUDNN_CHECK(cudnnSetStream(dnn_, stream_));
  algorithms_ = std::make_unique<AlgorithmStore>(kernel_cache_dir(name_),
                                                 "cudnn " + std::to_string(cudnnGetVersion()) + " algorithms with math types");
  if (algorithms_->read_from_file() > 0)
    report_.record("convolution_algorithms_read", {{"file", algorithms_->file()},
                                                   {"choices", std::to_string(algorithms_->read_from_file())}});
}

DeviceContext::~DeviceContext() {
  unit_caches_.clear();  // cuDNN plans, before the handle they were made with
  nccl_.reset();
  for (auto& [name, lib] : kernels_) cudaLibraryUnload(lib.first);
  if (dnn_) cudnnDestroy(dnn_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::shared_ptr<void> DeviceContext::unit_cache(const std::string& family,
                                                const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<void>& slot = unit_caches_[family];
  if (!slot) slot = make();
  return slot;
}

std::optional<int> DeviceContext::remembered_algorithm(const std::string& key) {
  return algorithms_->find(key);
}

void DeviceContext::remember_algorithm(const std::string& key, int algo) {
  algorithms_->remember(key, algo);
}

const ReluMaskConvention& DeviceContext::relu_mask_convention(DType t) {
  std::lock_guard<std::mutex> lock(probe_mutex_);
  auto it = relu_masks_.find(t);
  if (it != relu_masks_.end()) return it->second;
  ReluMaskConvention c = probe_relu_mask_convention(t, lt_, stream_, gemm_algorithms_);
  spdlog::info("cuda: ReLU mask probe on {}: {}", name_, c.detail);
  report_.record("relu_mask_probe", {{"dtype", std::string(dtype_name(t))},
                                     {"writer_matches", c.writer_matches() ? "yes" : "no"},
                                     {"reader_matches", c.reader_matches() ? "yes" : "no"},
                                     {"found", c.detail}});
  return relu_masks_.emplace(t, std::move(c)).first->second;
}

void DeviceContext::start_collectives(Communicator& run) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!nccl_) nccl_ = std::make_unique<NcclCommunicator>(run);
}

cudaKernel_t DeviceContext::load_kernel(const GeneratedKernel& k) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = kernels_.find(k.name); it != kernels_.end()) return it->second.second;
  // What start-up spends on kernels, in the report: an NVRTC compilation, or a read from the disk.
  const size_t compiles = images_->compiles(), disk_hits = images_->disk_hits();
  const auto started = std::chrono::steady_clock::now();
  const CompiledKernelImage& image = images_->get(k.source, k.name, nvrtc_target_);
  if (images_->compiles() != compiles || images_->disk_hits() != disk_hits)
    report_.record("kernel_image", {{"kernel", k.name},
                                    {"from", images_->compiles() != compiles ? "NVRTC" : "disk cache"},
                                    {"ms", std::to_string(std::chrono::duration<double, std::milli>(
                                                              std::chrono::steady_clock::now() - started)
                                                              .count())}});
  cudaLibrary_t lib = nullptr;
  AMP_CUDA_CHECK(cudaLibraryLoadData(&lib, image.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  AMP_CUDA_CHECK(cudaLibraryGetKernel(&kernel, lib, k.name.c_str()));
  kernels_.emplace(k.name, std::make_pair(lib, kernel));
  return kernel;
}

}  // namespace amp::cuda
