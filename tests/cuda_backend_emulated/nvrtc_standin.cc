// A host stand-in of NVRTC and of the runtime's library loading (cudaLibraryLoadData,
// cudaLibraryGetKernel, cudaLaunchKernel on the kernel handle), for the kernels
// backends/cuda/elementwise_codegen.cc generates.
//
// "Compiling" a program compiles its exact source as host C++ with the system compiler
// (AMP_HOST_CXX), tests/support/cuda_host_shim.h included first as in cuda_codegen_host_test.cc,
// into a shared object, cached on disk by a hash of the source and the options
// (AMP_EMU_KERNEL_DIR, default in the build folder) so that each distinct kernel is compiled once
// per build folder. The "CUBIN" (or PTX) is a short text that names the shared object and each
// kernel's __launch_bounds__ (a launch of more threads is refused, as by the runtime) and which of
// its parameters are __restrict__ pointers; loading it dlopens that; a kernel handle is the
// wrapper the shared object exports for each __global__ function: it reports the sizes of the
// kernel's parameters (so a launch copies its arguments, as the runtime does, and a captured
// launch keeps the copy) and runs the kernel for every thread of every block, one after another
// (the generated kernels have no barriers). A launch that passes one address as two __restrict__
// pointers, one of them written through, is refused (cudaErrorInvalidValue): on a GPU it is
// undefined behaviour the compiler may act on (reads through the non-coherent cache, loads moved
// past stores), which no result shows. Only equal addresses are caught, the way a buffer is
// passed as both input and output; overlapping ranges would need the extents.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"

struct _nvrtcProgram {
  std::string source, name, log, image;
};

struct CUlib_st {
  void* so = nullptr;
  std::map<std::string, unsigned> max_threads;  // __launch_bounds__ per kernel
  std::map<std::string, std::string> restrict_params;  // per kernel, per parameter: 'w' written, 'r' read, '-' other
};

using LaunchFn = void (*)(void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);
using ParamsFn = int (*)(unsigned long long* sizes, int capacity);

struct CUkern_st {
  std::string name;
  LaunchFn launch = nullptr;
  std::vector<size_t> param_sizes;
  unsigned max_threads = 1024;
  std::string restrict_params;  // as CUlib_st's
};

namespace {

// This "CUBIN" names a shared object in one build folder, so it must not outlive that folder in
// the backend's kernel cache kept between processes (~/.cache/onnx-amp/kernels by default,
// device_context.cc): another build's tests would find it and dlopen a file that is gone. Unless
// the caller chose a folder, the cache stays in memory.
const bool kMemoryOnlyKernelCache = [] { return setenv("AMP_KERNEL_CACHE_DIR", "", /*overwrite=*/0) == 0; }();

constexpr const char* kImageMagic = "AMP-HOST-KERNEL-SO ";

std::mutex g_mutex;
std::set<const CUkern_st*> g_kernels;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// Faults of a host kernel come back here (a read past a buffer reaches the guard page after it).
sigjmp_buf g_fault_jump;
volatile sig_atomic_t g_fault_armed = 0;
void on_fault(int) {
  if (g_fault_armed) siglongjmp(g_fault_jump, 1);
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

}  // namespace

extern "C" {

nvrtcResult nvrtcVersion(int* major, int* minor) {
  *major = 13;
  *minor = 0;
  return NVRTC_SUCCESS;
}

static const int kArchs[] = {75, 80, 86, 87, 89, 90, 100, 120};

nvrtcResult nvrtcGetNumSupportedArchs(int* n) {
  *n = static_cast<int>(sizeof kArchs / sizeof kArchs[0]);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int* archs) {
  std::memcpy(archs, kArchs, sizeof kArchs);
  return NVRTC_SUCCESS;
}

const char* nvrtcGetErrorString(nvrtcResult r) {
  switch (r) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    default: return "NVRTC_ERROR (stand-in)";
  }
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int num_headers, const char* const*,
                               const char* const*) {
  if (!prog || !src) return NVRTC_ERROR_INVALID_INPUT;
  if (num_headers != 0) return NVRTC_ERROR_INVALID_INPUT;  // the generated sources include nothing
  *prog = new _nvrtcProgram{src, name ? name : "default_program", "", ""};
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  if (!prog || !*prog) return NVRTC_ERROR_INVALID_PROGRAM;
  delete *prog;
  *prog = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char* const* options) {
  if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
  std::string opts;
  bool fmad_off = false;
  for (int i = 0; i < num_options; ++i) {
    const std::string o = options[i];
    // The options NVRTC documents that the backend passes; anything else would be a surprise.
    if (o == "--fmad=false") fmad_off = true;
    else if (o == "--fmad=true" || o == "--std=c++17" || o == "--extra-device-vectorization" ||
             o.rfind("--gpu-architecture=", 0) == 0 || o.rfind("-arch=", 0) == 0) {
    } else {
      prog->log = "stand-in nvrtc: unexpected option " + o;
      return NVRTC_ERROR_INVALID_OPTION;
    }
    opts += o + "\n";
  }
  // The __global__ functions the source defines, each exported by a wrapper.
  // With their __launch_bounds__ (max threads per block), which a launch must respect.
  // With their __restrict__ pointer parameters: 'w' for one written through, 'r' for a const one.
  std::vector<std::string> kernels, bounds, restricts;
  static const std::regex global_fn(
      R"(__global__\s+void\s+(?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?(\w+)\s*\(([^)]*)\))");
  for (auto it = std::sregex_iterator(prog->source.begin(), prog->source.end(), global_fn); it != std::sregex_iterator();
       ++it) {
    kernels.push_back((*it)[2]);
    bounds.push_back((*it)[1].matched ? (*it)[1].str() : "1024");
    std::string flags;
    std::istringstream params((*it)[3].str());
    for (std::string param; std::getline(params, param, ',');) {
      const bool restricted = param.find("__restrict__") != std::string::npos;
      const bool read_only = std::regex_search(param, std::regex(R"(^\s*const\b)"));
      flags += !restricted ? '-' : read_only ? 'r' : 'w';
    }
    restricts.push_back(flags);
  }
  if (kernels.empty()) {
    prog->log = "stand-in nvrtc: no __global__ function in " + prog->name;
    return NVRTC_ERROR_COMPILATION;
  }
  // nvrtc's --fmad=false is the host's -ffp-contract=off; --fmad=true would allow contraction.
  const std::string cxx = std::string(AMP_HOST_CXX) + " -std=c++17 -O1 -fPIC -shared -w " +
                          (fmad_off ? "-ffp-contract=off" : "-ffp-contract=fast") + " -I" +
                          shell_quote(std::string(AMP_SOURCE_DIR) + "/tests/support");
  const std::string dir = amp_standin::kernel_cache_dir();
  char key[32];
  std::snprintf(key, sizeof key, "%016llx",
                static_cast<unsigned long long>(fnv1a(cxx + "\n" + opts + "\n" + prog->source)));
  const std::string so = dir + "/" + key + ".so";
  if (!file_exists(so)) {
    std::string driver = "#include \"cuda_host_shim.h\"\n#include <type_traits>\nnamespace amp_kernel {\n#line 1 \"" +
                         prog->name + "\"\n" + prog->source + "\n}\n";
    driver +=
        "template <class... A> int amp_params(void (*)(A...), unsigned long long* s, int cap) {\n"
        "  int i = 0;\n"
        "  ((i < cap ? (void)(s[i] = sizeof(std::remove_cv_t<std::remove_reference_t<A>>)) : (void)0, ++i), ...);\n"
        "  return i;\n}\n"
        "template <class... A> void amp_launch(void (*k)(A...), void** args, unsigned gx, unsigned gy, unsigned gz,\n"
        "                                      unsigned bx, unsigned by, unsigned bz) {\n"
        "  gridDim = {gx, gy, gz};\n  blockDim = {bx, by, bz};\n"
        "  for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x)\n"
        "    for (unsigned tz = 0; tz < bz; ++tz) for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx) {\n"
        "      blockIdx = {x, y, z};\n      threadIdx = {tx, ty, tz};\n"
        "      amp_host::call(k, args, std::index_sequence_for<A...>{});\n    }\n}\n";
    for (const std::string& k : kernels)
      driver += "extern \"C\" int amp_params_" + k + "(unsigned long long* s, int cap) { return amp_params(&amp_kernel::" +
                k + ", s, cap); }\nextern \"C\" void amp_launch_" + k +
                "(void** a, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) { amp_launch(&amp_kernel::" +
                k + ", a, gx, gy, gz, bx, by, bz); }\n";
    ::mkdir(dir.c_str(), 0755);
    const std::string tmp = dir + "/" + key + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp + ".cc");
      out << driver;
    }
    const std::string cmd = cxx + " -o " + shell_quote(tmp + ".so") + " -x c++ " + shell_quote(tmp + ".cc") + " 2>&1";
    std::string log;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) log.append(buf, n);
      const int rc = pclose(p);
      std::remove((tmp + ".cc").c_str());
      if (rc != 0) {
        prog->log = "stand-in nvrtc: host compile failed (" + cmd + "):\n" + log;
        std::remove((tmp + ".so").c_str());
        return NVRTC_ERROR_COMPILATION;
      }
    } else {
      prog->log = "stand-in nvrtc: cannot run the host compiler";
      return NVRTC_ERROR_COMPILATION;
    }
    std::rename((tmp + ".so").c_str(), so.c_str());  // atomic: a concurrent process sees all or nothing
  }
  // The image: the shared object's path, then "name max_threads" per kernel, a line each.
  prog->image = std::string(kImageMagic) + so + "\n";
  for (size_t i = 0; i < kernels.size(); ++i) prog->image += kernels[i] + " " + bounds[i] + " " + restricts[i] + "\n";
  prog->image.push_back('\0');
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = prog->log.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
  std::memcpy(log, prog->log.c_str(), prog->log.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) {
  if (!prog || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
  *size = prog->image.size();
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* out) {
  if (!prog || prog->image.empty()) return NVRTC_ERROR_INVALID_PROGRAM;
  std::memcpy(out, prog->image.data(), prog->image.size());
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* size) { return nvrtcGetCUBINSize(prog, size); }
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* out) { return nvrtcGetCUBIN(prog, out); }

cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, cudaJitOption*, void**, unsigned int,
                                cudaLibraryOption*, void**, unsigned int) {
  if (!library || !code) return cudaErrorInvalidValue;
  const char* text = static_cast<const char*>(code);
  if (std::strncmp(text, kImageMagic, std::strlen(kImageMagic)) != 0) return cudaErrorInvalidKernelImage;
  std::istringstream lines(text + std::strlen(kImageMagic));
  std::string path, line;
  std::getline(lines, path);
  void* so = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    std::fprintf(stderr, "stand-in cudaLibraryLoadData: %s\n", dlerror());
    return cudaErrorInvalidKernelImage;
  }
  auto* lib = new CUlib_st{so, {}, {}};
  while (std::getline(lines, line)) {
    std::istringstream kv(line);
    std::string name, restricts;
    unsigned bound = 1024;
    if (kv >> name >> bound) lib->max_threads[name] = bound;
    if (kv >> restricts) lib->restrict_params[name] = restricts;
  }
  *library = lib;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t* kernel, cudaLibrary_t library, const char* name) {
  if (!kernel || !library || !name) return cudaErrorInvalidValue;
  auto launch = reinterpret_cast<LaunchFn>(dlsym(library->so, (std::string("amp_launch_") + name).c_str()));
  auto params = reinterpret_cast<ParamsFn>(dlsym(library->so, (std::string("amp_params_") + name).c_str()));
  if (!launch || !params) return cudaErrorSymbolNotFound;
  auto* k = new CUkern_st{name, launch, {}, 1024, ""};
  if (auto it = library->max_threads.find(name); it != library->max_threads.end()) k->max_threads = it->second;
  if (auto it = library->restrict_params.find(name); it != library->restrict_params.end()) k->restrict_params = it->second;
  unsigned long long sizes[256];
  const int n = params(sizes, 256);
  if (n > 256) return cudaErrorInvalidValue;
  k->param_sizes.assign(sizes, sizes + n);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_kernels.insert(k);
  *kernel = k;
  return cudaSuccess;
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  if (!library) return cudaErrorInvalidValue;
  // The kernel handles of the library stay allocated (a captured graph may still name them);
  // the shared object stays mapped for the same reason.
  delete library;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem, cudaStream_t stream) {
  const auto* k = static_cast<const CUkern_st*>(func);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_kernels.count(k)) {
      amp_standin::set_last_error(cudaErrorInvalidDeviceFunction);
      return cudaErrorInvalidDeviceFunction;
    }
  }
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  // More threads than the kernel's __launch_bounds__: the runtime refuses the launch.
  if (threads > k->max_threads) {
    amp_standin::set_last_error(cudaErrorLaunchOutOfResources);
    return cudaErrorLaunchOutOfResources;
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 || grid.y > 65535 ||
      grid.z > 65535 || grid.x > 0x7fffffffu || shared_mem > (48u << 10)) {
    amp_standin::set_last_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  // One address as two __restrict__ pointers, one written through: undefined behaviour on a GPU.
  const std::string& r = k->restrict_params;
  for (size_t i = 0; i < r.size() && i < k->param_sizes.size(); ++i)
    for (size_t j = i + 1; j < r.size() && j < k->param_sizes.size(); ++j) {
      if (r[i] == '-' || r[j] == '-' || (r[i] == 'r' && r[j] == 'r')) continue;
      const void* a = *static_cast<void* const*>(args[i]);
      const void* b = *static_cast<void* const*>(args[j]);
      if (a && a == b) {
        std::fprintf(stderr, "stand-in cudaLaunchKernel: kernel %s gets %p as __restrict__ parameters %zu and %zu\n",
                     k->name.c_str(), a, i, j);
        amp_standin::set_last_error(cudaErrorInvalidValue);
        return cudaErrorInvalidValue;
      }
    }
  // The arguments are copied now, as the runtime copies them into the launch's parameter space:
  // the caller's array (and what it points to) may be gone before a captured launch replays.
  auto storage = std::make_shared<std::vector<std::vector<unsigned char>>>();
  for (size_t i = 0; i < k->param_sizes.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(args[i]);
    storage->emplace_back(p, p + k->param_sizes[i]);
  }
  return amp_standin::enqueue(stream, [k, grid, block, storage] {
    std::vector<void*> ptrs;
    // Each parameter in its own 16-byte aligned block (a std::vector's new[] is 16-byte aligned).
    for (auto& bytes : *storage) ptrs.push_back(bytes.data());
    struct sigaction action {}, old_segv{}, old_bus{};
    action.sa_handler = on_fault;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &old_segv);
    sigaction(SIGBUS, &action, &old_bus);
    const bool faulted = sigsetjmp(g_fault_jump, 1) != 0;
    if (!faulted) {
      g_fault_armed = 1;
      k->launch(ptrs.data(), grid.x, grid.y, grid.z, block.x, block.y, block.z);
    }
    g_fault_armed = 0;
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    // On a GPU: cudaErrorIllegalAddress, sticky, reported by the next synchronising call; here
    // an exception naming the kernel, which fails the test at once.
    if (faulted)
      throw std::runtime_error("stand-in cudaLaunchKernel: kernel " + k->name +
                               " accessed memory outside its buffers (cudaErrorIllegalAddress on a GPU)");
  });
}

}  // extern "C"
