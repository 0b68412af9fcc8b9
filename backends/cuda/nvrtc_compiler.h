// Runtime compilation of generated CUDA source with NVRTC, and the cache that makes it a one-time
// cost: images are kept in memory keyed by a hash of (source, target, NVRTC version, options) and,
// when a folder is given, on disk under the same key, so a second process loads instead of
// compiling (NVRTC takes ~50-200 ms per kernel; a GPT step has dozens of fused groups).
// NVRTC needs no GPU, so everything here runs and is tested on a machine without one.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace amp {

struct CompiledKernelImage {
  std::string target;  // "sm_90" (CUBIN) or "compute_90" (PTX, JIT-compiled by the driver at load)
  std::string image;   // CUBIN bytes, or PTX text with its terminating NUL
  std::string log;     // NVRTC's log, often empty
};

// The NVRTC target for a device of compute capability arch (e.g. 90): real CUBIN when NVRTC knows
// that arch, else PTX for the newest virtual arch it knows that is not newer than the device.
// Throws Error when NVRTC supports nothing old enough.
std::string nvrtc_target_for(int arch);
// "13.0"
std::string nvrtc_version();

// Compiles a translation unit that defines the extern "C" kernel `kernel_name`. Throws Error with
// the kernel name and NVRTC's full log when compilation fails.
CompiledKernelImage compile_cuda_source(const std::string& source, const std::string& kernel_name, const std::string& target);

class KernelImageCache {
 public:
  // disk_dir empty: memory only. The folder is created when missing.
  explicit KernelImageCache(std::string disk_dir = "");

  // The compiled image for (source, target); compiles on a miss. Thread-safe; the reference stays
  // valid for the cache's lifetime.
  const CompiledKernelImage& get(const std::string& source, const std::string& kernel_name, const std::string& target);

  size_t memory_hits() const { return memory_hits_; }
  size_t disk_hits() const { return disk_hits_; }
  size_t compiles() const { return compiles_; }

 private:
  std::string disk_dir_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<CompiledKernelImage>> images_;
  size_t memory_hits_ = 0, disk_hits_ = 0, compiles_ = 0;
};

}  // namespace amp
