#include "backends/cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace amp {

namespace {

constexpr const char* kModuleName = "libamp_cuda_backend.so";

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string exe(buf, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

struct Module {
  void* handle = nullptr;
  std::string why;  // when handle is null
};

Module load() {
  Module m;
#ifndef AMP_CUDA_MODULE_BUILD_PATH
  m.why = "this build has no CUDA backend (nvcc not found at configure time, or AMP_ENABLE_CUDA=OFF)";
#else
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("AMP_CUDA_BACKEND"); env && *env) {
    candidates.push_back(env);
  } else {
    const std::string dir = executable_dir();
    if (!dir.empty()) candidates.push_back(dir + "/" + kModuleName);
    candidates.push_back(AMP_CUDA_MODULE_BUILD_PATH);
  }
  for (const std::string& path : candidates) {
    if (!is_file(path)) continue;
    dlerror();
    m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m.handle) {
      const char* err = dlerror();
      m.why = "cannot load " + path + ": " + (err ? err : "dlopen failed");
    }
    return m;
  }
  m.why = std::string(kModuleName) + " not found (looked at ";
  for (size_t i = 0; i < candidates.size(); ++i) m.why += (i ? ", " : "") + candidates[i];
  m.why += "; AMP_CUDA_BACKEND names another)";
#endif
  return m;
}

}  // namespace

void* cuda_module_symbol(const char* name, std::string* why) {
  static std::once_flag once;
  static Module module;
  std::call_once(once, [] { module = load(); });
  if (!module.handle) {
    if (why) *why = module.why;
    return nullptr;
  }
  dlerror();
  void* sym = dlsym(module.handle, name);
  if (!sym && why) {
    const char* err = dlerror();
    *why = std::string(kModuleName) + " has no entry point " + name + (err ? std::string(": ") + err : "");
  }
  return sym;
}

bool cuda_driver_present() {
  // Kept loaded when found: the CUDA runtime loads it next.
  static const bool present = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
  return present;
}

}  // namespace amp
