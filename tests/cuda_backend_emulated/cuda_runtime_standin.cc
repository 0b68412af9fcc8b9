// A host stand-in of the CUDA runtime calls backends/cuda/ makes (and cudaLaunchKernel for the
// NVRTC kernels, whose loading is in nvrtc_standin.cc): one emulated device, Hopper-like (compute
// capability 9.0) but with 4 SMs so that grids sized from the SM count stay small on the CPU.
//
// Device memory is host memory: each cudaMalloc is its own mapping, its end (rounded up to 256
// bytes, the alignment cudaMalloc guarantees) against an inaccessible page, so a kernel that runs
// past a buffer faults (the fiber emulator and cudaLaunchKernel turn the fault into an error), and
// its bytes start as 0xff (NaN in every float type), as uninitialised device memory is garbage.
//
// Streams: work runs at once, on the calling thread, in order, so every stream is always idle and
// cudaStreamSynchronize has nothing to wait for. Capture (cudaStreamBeginCapture) records the work
// enqueued on the stream instead of running it; cudaStreamEndCapture hands the records to a graph,
// cudaGraphInstantiate copies them and cudaGraphLaunch runs them again at each launch. What a
// real runtime refuses during a capture in the global or thread-local mode, this one refuses too
// (synchronous copies and sets, cudaMalloc, synchronising the capturing stream, work on the
// legacy stream), and the refusal invalidates the capture, as documented. Events fork other
// streams into a capture and join them back; a capture ended with forked work not joined fails
// (cudaErrorStreamCaptureUnjoined), as on a device.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "tests/cuda_backend_emulated/standin.h"
#include "tests/support/cuda_emulator.h"

struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::vector<std::function<void()>> recorded;
  // Forked into another stream's capture (by waiting for an event recorded there): its work is
  // recorded into that stream's graph, in issue order, and must be joined back before the capture
  // ends (the origin waits for an event recorded on it after its last work).
  CUstream_st* origin = nullptr;
  size_t forked_work = 0, joined_work = 0;
};
// An event as captures see it: recorded outside a capture it is complete at once (work runs at
// once); recorded inside one it marks how much of its stream's captured work it follows.
struct CUevent_st {
  CUstream_st* capture = nullptr;  // the origin of the capture it was last recorded in, else null
  CUstream_st* stream = nullptr;   // where it was recorded then
  size_t work = 0;                 // that stream's forked work at the record
  // When it was recorded outside a capture (the work before it has run by then), for
  // cudaEventElapsedTime: host time, as the emulated device's work is host work.
  std::chrono::steady_clock::time_point at{};
};
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};

namespace amp_standin {
namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
std::mutex g_mutex;
std::map<uintptr_t, std::pair<size_t, size_t>> g_allocations;  // user pointer -> (bytes, mapping bytes)
std::set<CUstream_st*> g_streams;
thread_local std::set<CUstream_st*> t_capturing;  // streams this thread captures (global/thread-local mode)

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

// A call that is unsafe during a capture in the global or thread-local mode: refused, and the
// captures of this thread are invalidated (cudaStreamCaptureMode's documentation).
bool refuse_during_capture() {
  bool refuse = false;
  for (CUstream_st* s : t_capturing)
    if (s->mode != cudaStreamCaptureModeRelaxed) {
      s->invalidated = true;
      refuse = true;
    }
  return refuse;
}

bool launch_hook(cudaStream_t stream, std::function<void()>&& work) {
  if (stream == cudaStreamLegacy) stream = nullptr;
  if (stream == cudaStreamPerThread) return false;
  if (stream == nullptr && refuse_during_capture()) {
    record(cudaErrorStreamCaptureImplicit);
    return true;  // not run
  }
  if (stream && stream->capturing) {
    if (stream->origin) {
      ++stream->forked_work;
      stream->origin->recorded.push_back(std::move(work));
    } else {
      stream->recorded.push_back(std::move(work));
    }
    return true;
  }
  return false;
}

struct InstallHook {
  InstallHook() { amp_emu::detail::set_launch_hook(&launch_hook); }
} g_install_hook;

constexpr size_t kPage = 4096;

}  // namespace

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work) {
  if (launch_hook(stream, std::move(work))) return stream ? cudaSuccess : cudaErrorStreamCaptureImplicit;
  work();
  return cudaSuccess;
}

bool is_device_range(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second.first;
}

void set_last_error(cudaError_t e) { record(e); }

std::string kernel_cache_dir() {
  const char* d = std::getenv("AMP_EMU_KERNEL_DIR");
  if (d && *d) return d;
#ifdef AMP_EMU_DEFAULT_KERNEL_DIR
  return AMP_EMU_DEFAULT_KERNEL_DIR;
#else
  return "/tmp/amp-emu-kernels";
#endif
}

}  // namespace amp_standin

using namespace amp_standin;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return record(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop || device != 0) return record(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "emulated H100 (host stand-in, 4 SMs)");
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->totalGlobalMem = size_t{80} << 30;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->sharedMemPerMultiprocessor = 228 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 << 20;
  prop->memoryBusWidth = 5120;
  prop->concurrentKernels = 1;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : record(cudaErrorInvalidDevice); }

cudaError_t cudaDeviceSynchronize(void) { return refuse_during_capture() ? record(cudaErrorStreamCaptureUnsupported) : cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return record(cudaErrorInvalidValue);
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  if (size == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  const size_t rounded = (size + 255) / 256 * 256;
  const size_t mapping = (rounded + kPage - 1) / kPage * kPage + kPage;
  void* base = mmap(nullptr, mapping, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return record(cudaErrorMemoryAllocation);
  char* guard = static_cast<char*>(base) + mapping - kPage;
  mprotect(guard, kPage, PROT_NONE);
  char* p = guard - rounded;
  std::memset(p, 0xff, rounded);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(p)] = {size, mapping};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end()) return record(cudaErrorInvalidValue);
  const size_t mapping = it->second.second;
  char* base = static_cast<char*>(ptr) + (it->second.first + 255) / 256 * 256 + kPage - mapping;
  munmap(base, mapping);
  g_allocations.erase(it);
  return cudaSuccess;
}

// Page-locked host memory: host memory (the stand-ins' copies from it are the same memmove).
cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return record(cudaErrorInvalidValue);
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  *ptr = size ? std::malloc(size) : nullptr;
  return size && !*ptr ? record(cudaErrorMemoryAllocation) : cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

// The copy's kind must say where its ends are (cudaMemcpyDefault: anywhere).
static cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault) {
    if (src_dev && !is_device_range(src, count)) return cudaErrorInvalidValue;
    if (dst_dev && !is_device_range(dst, count)) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t e = check_copy(dst, src, count, kind)) return record(e);
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_copy(dst, src, count, kind)) return record(e);
  // Captured: a copy node reads the source at each replay, as a graph's memcpy node does. Host
  // memory in a captured copy is refused (stricter than CUDA, which captures copies from pinned
  // memory): replays would read whatever the host buffer holds then, and the backend copies
  // feeds and fetches outside its captures.
  if (stream && stream != cudaStreamLegacy && stream != cudaStreamPerThread && stream->capturing && count &&
      (!is_device_range(dst, count) || !is_device_range(src, count))) {
    stream->invalidated = true;
    return record(cudaErrorStreamCaptureUnsupported);
  }
  return record(enqueue(stream, [=] {
    if (count) std::memmove(dst, src, count);
  }));
}

// Pitched copies and fills (device memory only here: the backend stages padded matrices with
// them, gemm_padding.h). CUDA's rules: width at most either pitch; the last row ends width bytes
// after its start, so the range checked is (height - 1) * pitch + width.
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch || kind != cudaMemcpyDeviceToDevice) return record(cudaErrorInvalidValue);
  if (!is_device_range(dst, (height - 1) * dpitch + width) || !is_device_range(src, (height - 1) * spitch + width))
    return record(cudaErrorInvalidValue);
  return record(enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  }));
}

cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch || !is_device_range(p, (height - 1) * pitch + width)) return record(cudaErrorInvalidValue);
  return record(enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r) std::memset(static_cast<char*>(p) + r * pitch, value, width);
  }));
}

cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  if (count && !is_device_range(p, count)) return record(cudaErrorInvalidValue);
  if (count) std::memset(p, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (count && !is_device_range(p, count)) return record(cudaErrorInvalidValue);
  return record(enqueue(stream, [=] {
    if (count) std::memset(p, value, count);
  }));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  if (!stream) return record(cudaErrorInvalidValue);
  *stream = new CUstream_st;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_streams.erase(stream)) return record(cudaErrorInvalidResourceHandle);
  t_capturing.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream && stream != cudaStreamLegacy && stream != cudaStreamPerThread && stream->capturing) {
    (stream->origin ? stream->origin : stream)->invalidated = true;
    return record(cudaErrorStreamCaptureUnsupported);
  }
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream || stream == cudaStreamLegacy) return record(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  if (stream == cudaStreamPerThread) return record(cudaErrorInvalidValue);  // not emulated
  if (stream->capturing) return record(cudaErrorIllegalState);
  stream->capturing = true;
  stream->invalidated = false;
  stream->mode = mode;
  stream->recorded.clear();
  if (mode != cudaStreamCaptureModeRelaxed) t_capturing.insert(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread || !graph) return record(cudaErrorInvalidValue);
  if (!stream->capturing || stream->origin) return record(cudaErrorIllegalState);
  stream->capturing = false;
  t_capturing.erase(stream);
  std::vector<std::function<void()>> work = std::move(stream->recorded);
  stream->recorded.clear();
  bool unjoined = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (CUstream_st* forked : g_streams) {
      if (forked->origin != stream) continue;
      unjoined = unjoined || forked->forked_work > forked->joined_work;
      forked->capturing = false;
      forked->origin = nullptr;
      forked->forked_work = forked->joined_work = 0;
    }
  }
  if (stream->invalidated || unjoined) {
    *graph = nullptr;
    return record(unjoined ? cudaErrorStreamCaptureUnjoined : cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(work)};
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  if (!event) return record(cudaErrorInvalidValue);
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  if (stream == cudaStreamLegacy || stream == cudaStreamPerThread) stream = nullptr;
  if (!stream && refuse_during_capture()) return record(cudaErrorStreamCaptureImplicit);
  if (stream && stream->capturing) {
    event->capture = stream->origin ? stream->origin : stream;
    event->stream = stream;
    event->work = stream->forked_work;
  } else {
    event->capture = event->stream = nullptr;
    event->at = std::chrono::steady_clock::now();
  }
  return cudaSuccess;
}

// Work runs when enqueued, so an event recorded outside a capture has passed; one recorded inside
// a capture cannot be waited for (CUDA answers as below).
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  if (event->capture) return record(cudaErrorStreamCaptureUnsupported);
  if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return record(cudaErrorInvalidValue);
  if (start->capture || end->capture) return record(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

// Inside a capture, what CUDA documents: a stream not capturing that waits for an event recorded in
// a capture joins that capture (fork); the capture's origin waiting for an event recorded on a
// forked stream joins that stream's work up to the record; an event from another capture, or from
// outside one, cannot be waited for inside a capture (isolation).
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  if (stream == cudaStreamLegacy || stream == cudaStreamPerThread) stream = nullptr;
  CUstream_st* capture = stream && stream->capturing ? (stream->origin ? stream->origin : stream) : nullptr;
  if (!event->capture) {
    if (!capture) return cudaSuccess;
    capture->invalidated = true;
    return record(cudaErrorStreamCaptureIsolation);
  }
  if (!stream) return record(cudaErrorStreamCaptureIsolation);
  if (!capture) {
    stream->capturing = true;
    stream->origin = event->capture;
    stream->forked_work = stream->joined_work = 0;
    return cudaSuccess;
  }
  if (capture != event->capture) {
    capture->invalidated = true;
    return record(cudaErrorStreamCaptureIsolation);
  }
  if (stream == capture && event->stream->origin)
    event->stream->joined_work = std::max(event->stream->joined_work, event->work);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return record(cudaErrorInvalidValue);
  // A graph launched into a capturing stream becomes one node of the new graph.
  return record(enqueue(stream, [exec] {
    for (const auto& w : exec->work) w();
  }));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  const cudaError_t k = amp_emu::detail::take_last_error();
  return e != cudaSuccess ? e : k;
}

cudaError_t cudaPeekAtLastError(void) {
  return t_last_error != cudaSuccess ? t_last_error : amp_emu::detail::peek_last_error();
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorSymbolNotFound: return "cudaErrorSymbolNotFound";
    case cudaErrorInvalidKernelImage: return "cudaErrorInvalidKernelImage";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    default: return "cudaError (stand-in: unnamed)";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return cudaGetErrorName(e);
  }
}

}  // extern "C"
