// What the host stand-ins of the CUDA libraries (tests/cuda_backend_emulated/*_standin.cc) share:
// one emulated device whose "device memory" is host memory, and streams whose work runs at once
// unless the stream is being captured into a CUDA Graph, when it is recorded to run at each
// launch of the instantiated graph instead.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

struct cudnnContext;

namespace amp_standin {

// Runs `work` now, or records it when `stream` is capturing (returns the error a real runtime
// would: e.g. work on the legacy stream while a capture is going on invalidates that capture).
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);

// Whether [p, p + bytes) lies inside one allocation of cudaMalloc.
bool is_device_range(const void* p, size_t bytes);

// The error for the next cudaGetLastError (kernel faults, refused launches).
void set_last_error(cudaError_t e);

// The stream a cuDNN handle enqueues on (cudnnSetStream; cudnn_standin.cc).
cudaStream_t cudnn_stream(cudnnContext* handle);

// The directory for compiled host kernels (NVRTC stand-in).
std::string kernel_cache_dir();

}  // namespace amp_standin
