// REQUIRE_GPU(): skips a test that needs a CUDA device, saying why there is none
// (cuda::CudaBackend::available). Without one, the device-free half of such a test has run first.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda_backend.h"

#define REQUIRE_GPU()                                                                                \
  do {                                                                                               \
    std::string why_no_device;                                                                       \
    if (!::amp::cuda::CudaBackend().available(&why_no_device))                                       \
      GTEST_SKIP() << "no usable CUDA device: " << why_no_device;                                    \
  } while (0)

namespace amp::test {

// Whether the device is the host stand-ins' (test_cuda_backend_emulated), where AMP_STANDIN_* make
// cuBLASLt and cuDNN answer as a device may and both layouts' convolutions sum alike; on a GPU
// those variables change nothing and the tests check parity alone.
inline bool on_standins() {
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && std::string(prop.name).find("host stand-in") != std::string::npos;
}

}  // namespace amp::test
