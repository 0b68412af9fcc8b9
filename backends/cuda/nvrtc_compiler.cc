#include "backends/cuda/nvrtc_compiler.h"

#include <nvrtc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "backends/cuda/elementwise_codegen.h"
#include "graph/error.h"

namespace amp {
namespace {

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw Error(std::string("NVRTC ") + what + ": " + nvrtcGetErrorString(r));
}

std::vector<int> supported_archs() {
  int n = 0;
  check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(n));
  check_nvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

// Fixed options, part of the cache key. --fmad=false: a fused Mul+Add must round twice like the
// two unfused kernels do, not once as an FMA, or fusion would change fp32 results.
const std::vector<std::string>& compile_options() {
  static const std::vector<std::string> options = {"--std=c++17", "--fmad=false", "--extra-device-vectorization"};
  return options;
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_target_for(int arch) {
  const std::vector<int> archs = supported_archs();
  for (int a : archs)
    if (a == arch) return "sm_" + std::to_string(arch);
  int best = 0;
  for (int a : archs)
    if (a <= arch) best = a;
  if (best == 0)
    throw Error("NVRTC " + nvrtc_version() + " cannot compile for compute capability " + std::to_string(arch / 10) +
                "." + std::to_string(arch % 10));
  return "compute_" + std::to_string(best);
}

CompiledKernelImage compile_cuda_source(const std::string& source, const std::string& kernel_name, const std::string& target) {
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), (kernel_name + ".cu").c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });

  std::vector<std::string> options = compile_options();
  options.push_back("--gpu-architecture=" + target);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult status = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  CompiledKernelImage out;
  out.target = target;
  size_t log_size = 0;
  check_nvrtc(nvrtcGetProgramLogSize(prog, &log_size), "nvrtcGetProgramLogSize");
  out.log.resize(log_size);
  check_nvrtc(nvrtcGetProgramLog(prog, out.log.data()), "nvrtcGetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (status != NVRTC_SUCCESS)
    throw Error("NVRTC could not compile kernel " + kernel_name + " for " + target + " (" + nvrtcGetErrorString(status) +
                "):\n" + out.log);

  size_t size = 0;
  if (target.rfind("sm_", 0) == 0) {
    check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check_nvrtc(nvrtcGetCUBIN(prog, out.image.data()), "nvrtcGetCUBIN");
  } else {
    check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check_nvrtc(nvrtcGetPTX(prog, out.image.data()), "nvrtcGetPTX");
  }
  return out;
}

KernelImageCache::KernelImageCache(std::string disk_dir) : disk_dir_(std::move(disk_dir)) {
  if (disk_dir_.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(disk_dir_, error);
  if (error) {  // a cache, not a requirement: compile every time instead
    spdlog::warn("kernel cache: cannot create {} ({}); generated kernels are compiled in every process", disk_dir_,
                 error.message());
    disk_dir_.clear();
  }
}

const CompiledKernelImage& KernelImageCache::get(const std::string& source, const std::string& kernel_name,
                                                 const std::string& target) {
  std::string key_text = nvrtc_version() + "\n" + target + "\n";
  for (const auto& o : compile_options()) key_text += o + "\n";
  const std::string key = hex64(fnv1a64(key_text + source));

  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = images_.find(key); it != images_.end()) {
    ++memory_hits_;
    return *it->second;
  }
  auto image = std::make_unique<CompiledKernelImage>();
  const std::filesystem::path file = disk_dir_.empty() ? std::filesystem::path() : std::filesystem::path(disk_dir_) / (key + ".bin");
  if (!disk_dir_.empty() && std::filesystem::exists(file)) {
    image->target = target;
    image->image = read_whole_file(file);
    ++disk_hits_;
  } else {
    *image = compile_cuda_source(source, kernel_name, target);
    ++compiles_;
    if (!disk_dir_.empty()) {
      // Write then rename, so a concurrent reader never sees half a file. A failure leaves this
      // process's image in memory and stops writing (a full disk must not stop training).
      const std::filesystem::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
      bool written = false;
      {
        std::ofstream out(tmp, std::ios::binary);
        out.write(image->image.data(), static_cast<std::streamsize>(image->image.size()));
        written = static_cast<bool>(out);
      }
      std::error_code error;
      if (written) std::filesystem::rename(tmp, file, error);
      if (!written || error) {
        std::filesystem::remove(tmp, error);
        spdlog::warn("kernel cache: cannot write {}; no more images are kept there", tmp.string());
        disk_dir_.clear();
      }
    }
  }
  return *images_.emplace(key, std::move(image)).first->second;
}

}  // namespace amp
